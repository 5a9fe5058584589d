// models/imagenet_vit.h -- torchvision's Vision Transformer (Dosovitskiy et al., 2021): vit_b_16, and vit_s_16 in the
// same layout (timm's ViT-S/16 widths; timm and Hugging Face files are renamed into it by models/dialects.h).
//
// Dimension letters: B batch, N tokens (= patches + 1 class token), D width (hidden_dim), h heads.
//
//     conv_proj  Conv2d(C, D, kernel p, stride p)                 (B, D, S/p, S/p)
//     flatten + transpose                                         (B, P, D)        P = (S/p)^2
//     [class_token; patches] + encoder.pos_embedding              (B, N, D)
//     encoder.layers.encoder_layer_<i>: EncoderBlock               (B, N, D)
//         x = x + self_attention(ln_1(x));  x = x + mlp(ln_2(x))   mlp = Linear(D, M), GELU, -, Linear(M, D), -
//     encoder.ln (LayerNorm, eps 1e-6) of the class token          (B, D)
//     heads.head Linear(D, classes)                                (B, classes)
//
// vit_b_16: S 224, p 16, D 768, 12 layers, 12 heads, M 3072: 86,567,656 parameters at 1000 classes (torchvision's).
// vit_s_16: D 384, 6 heads, M 1536 (timm's vit_small_patch16_224): 22,050,664 at 1000 classes.
// Dropout is 0 everywhere (torchvision's default; the mlp keeps its empty slots 2 and 4 so the keys are mlp.0 and
// mlp.3 as in torchvision).
//
// reference: torchvision.models.vision_transformer (VisionTransformer, Encoder, EncoderBlock, MLPBlock), torchvision
// 0.14: key names are torchvision's (class_token, conv_proj, encoder.pos_embedding, encoder.layers.encoder_layer_0.
// ln_1, .self_attention.in_proj_weight, .mlp.0, encoder.ln, heads.head). Init as torchvision: conv_proj
// truncated-normal with std sqrt(1 / fan_in) (here N(0, 1/fan_in): the +-2 sigma cut-off changes 5 % of the values'
// tails only), zero bias; class_token zeros; pos_embedding N(0, 0.02^2); attention as torch.nn.MultiheadAttention;
// mlp Linears xavier_uniform with N(0, 1e-6^2) biases; heads.head zeros. LayerNorms eps 1e-6.
// docs: docs/models.md "Architectures".
#pragma once

#include "nn/attention.h"
#include "nn/conv.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/sequential.h"

namespace razor::models {

struct ImageNetViTConfig {
    int64_t image_size = 224;
    int64_t patch_size = 16;
    int64_t in_channels = 3;
    int64_t hidden_dim = 768;
    int64_t num_layers = 12;
    int64_t num_heads = 12;
    int64_t mlp_dim = 3072;

    static ImageNetViTConfig vit_b_16() { return {}; }
    static ImageNetViTConfig vit_s_16() { return {.hidden_dim = 384, .num_heads = 6, .mlp_dim = 1536}; }
};

class ViTEncoderBlock : public nn::Module {
public:
    ViTEncoderBlock(int64_t dim, int64_t heads, int64_t mlp_dim, Generator& gen);
    Tensor forward(const Tensor& x) override;   // (B, N, D) -> (B, N, D)
    // The same; the residual stream is carried in x's buffer (torchvision's x = x + input), each sum written over
    // the stream the caller gave up.
    Tensor forward_consuming(Tensor&& x) override;
    std::string type_name() const override { return "EncoderBlock"; }

    std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
    std::shared_ptr<nn::MultiheadAttention> self_attention;
    std::shared_ptr<nn::Sequential> mlp;
    int64_t dim;

private:
    Tensor run(Tensor x);   // forward's body; x is this call's own handle
};

// pos_embedding, the layers and the final LayerNorm (torchvision's Encoder).
class ViTEncoder : public nn::Module {
public:
    ViTEncoder(const ImageNetViTConfig& config, int64_t tokens, Generator& gen);
    Tensor forward(const Tensor& x) override;   // (B, N, D) tokens -> (B, N, D), normalised
    Tensor forward_consuming(Tensor&& x) override;   // the same; the position embedding added in x's buffer
    std::string type_name() const override { return "Encoder"; }

    Tensor pos_embedding;                        // (1, N, D)
    std::shared_ptr<nn::Sequential> layers;      // children encoder_layer_0 .. encoder_layer_{L-1}
    std::shared_ptr<nn::LayerNorm> ln;
};

class ImageNetViT : public nn::Module {
public:
    ImageNetViT(const ImageNetViTConfig& config, int64_t num_classes, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // (B, C, S, S) -> (B, classes)
    std::string type_name() const override { return "VisionTransformer"; }

    Tensor class_token;                          // (1, 1, D)
    std::shared_ptr<nn::Conv2d> conv_proj;
    std::shared_ptr<ViTEncoder> encoder;
    std::shared_ptr<nn::Sequential> heads;       // child "head": Linear(D, classes)
    std::shared_ptr<nn::Linear> head;
    ImageNetViTConfig config;
};

}  // namespace razor::models
