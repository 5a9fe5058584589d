// models/vit.h -- a Vision Transformer for small images (Dosovitskiy et al., 2021): ViT-Tiny with 4x4 patches.
//
// Dimension letters: B batch, N tokens (= patches + 1 class token), D width, h heads.
//
//     patch_embed  Conv2d(C, D, kernel 4, stride 4)           (B, D, 8, 8) on 32x32 images
//     flatten + transpose                                     (B, 64, D)
//     [cls_token; patches] + pos_embed                        (B, 65, D)
//     blocks.0 .. blocks.{depth-1}: TransformerBlock(D, h, 4)  (B, 65, D)
//     norm (LayerNorm) of the class token, head Linear(D, classes)   (B, classes)
//
// vit_tiny: D = 192, h = 3, depth 12 (5,362,762 parameters for 10 classes; depth 6: 2,693,170).
//
// reference: class ViT in scripts/fixtures/ops_models.py (timm's VisionTransformer layout without dropout, with
// the block of nn/transformer.h). Keys: cls_token (1, 1, D), pos_embed (1, N, D), patch_embed.weight/bias,
// blocks.<i>.{ln1, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj, ln2, fc1, fc2}.*, norm.*, head.*.
// Init: cls_token and pos_embed N(0, 0.02^2) (timm's trunc_normal_(std=0.02), whose +-2 cut-off is 100 sigma away);
// attention as torch.nn.MultiheadAttention; every other Linear and the patch conv PyTorch's defaults; LayerNorm 1, 0.
// docs: docs/models.md.
#pragma once

#include "nn/conv.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "nn/transformer.h"

namespace razor::models {

struct ViTConfig {
    int64_t image_size = 32;
    int64_t patch_size = 4;
    int64_t in_channels = 3;
    int64_t dim = 192;
    int64_t depth = 12;
    int64_t heads = 3;
    int64_t mlp_ratio = 4;
};

class VisionTransformer : public nn::Module {
public:
    VisionTransformer(const ViTConfig& config, int64_t num_classes, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // (B, C, S, S) -> (B, classes)
    std::string type_name() const override { return "VisionTransformer"; }

    Tensor cls_token;   // (1, 1, D)
    Tensor pos_embed;   // (1, N, D)
    std::shared_ptr<nn::Conv2d> patch_embed;
    std::shared_ptr<nn::Sequential> blocks;
    std::shared_ptr<nn::LayerNorm> norm;
    std::shared_ptr<nn::Linear> head;
    ViTConfig config;
};

}  // namespace razor::models
