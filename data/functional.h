// data/functional.h -- image kernels behind the transforms: resize, crop with zero padding, flip, normalise.
//
// reference: torchvision.transforms.functional (resize with antialias=False, crop, hflip, normalize,
// convert_image_dtype) on tensors. docs: docs/data.md "Transforms".
//
// Images are (C, H, W) -- or (N, C, H, W) for resize_bilinear -- in u8 (raw pixels 0..255) or f32. Every kernel
// returns a new contiguous tensor and leaves its input untouched (an input may be a view into a whole dataset).
// These are data-pipeline kernels, not autograd ops: no gradient flows through them.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace razor::data {

// Bilinear resize to (out_h, out_w), half-pixel centres (align_corners=False), no antialiasing: PyTorch's
// F.interpolate(x, size, mode="bilinear", align_corners=False, antialias=False), which torchvision's tensor
// Resize(antialias=False) calls. u8 images are interpolated in float and rounded to nearest, ties to even (as
// torchvision rounds before casting back to uint8).
Tensor resize_bilinear(const Tensor& img, int64_t out_h, int64_t out_w);

// The window of rows [top, top + h) and columns [left, left + w); pixels outside the image are 0. A negative top or
// left, or a window past the far edge, is zero padding: crop(img, -4, -4, H + 8, W + 8) pads 4 on every side.
Tensor crop(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w);

// Mirrors the columns (left <-> right).
Tensor hflip(const Tensor& img);

// u8 -> f32 in [0, 1] (pixel / 255); f32 is returned as it is.
Tensor to_float(const Tensor& img);

// (x - mean[c]) / std[c] per channel; f32 only (use to_float first). mean and std have C entries, std > 0.
Tensor normalize(const Tensor& img, const std::vector<float>& mean, const std::vector<float>& std);

}  // namespace razor::data
