// models/pos_embedding.h -- a ViT's learned position embedding resized to another patch grid, for a checkpoint
// trained at one image size and loaded at another (224 px -> 160 or 384 px).
//
// reference: timm's resize_pos_embed / resample_abs_pos_embed and torchvision's interpolate_embeddings: the class
// token's row is kept, the g x g grid of patch rows is resized to g' x g' by bicubic interpolation, channel by
// channel. docs: docs/models.md "Loading at another image size".
//
// Convention: torch.nn.functional.interpolate(mode="bicubic", align_corners=False) without antialiasing, as timm's
// resize_pos_embed does: output pixel o samples the input at (o + 0.5) * g / g' - 0.5 with PyTorch's cubic kernel
// (A = -0.75), taps past the border clamped to it. timm's files are the ones most often loaded at another size
// (DeiT, the AugReg ViTs at 384 px), and the convention is the one PyTorch's image resizing uses. torchvision's
// interpolate_embeddings passes align_corners=True instead; the two differ by a fraction of a grid cell, which
// fine-tuning absorbs. timm's newer resample_abs_pos_embed antialiases when shrinking; razor does not (for a
// 14 -> 10 grid the difference is a mild low-pass).
#pragma once

#include <string>

#include "core/tensor.h"

namespace razor::models {

// pos (1, 1 + g*g, D) -> (1, 1 + grid*grid, D), float32. Throws naming `source` when pos is not (1, 1 + square, D)
// or grid < 1.
Tensor resize_pos_embedding(const Tensor& pos, int64_t grid, const std::string& source);

}  // namespace razor::models
