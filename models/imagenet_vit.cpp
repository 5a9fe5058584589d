// models/imagenet_vit.cpp -- see imagenet_vit.h.
#include "models/imagenet_vit.h"

#include <cmath>

#include "nn/init.h"
#include "nn/layers.h"

namespace razor::models {

ViTEncoderBlock::ViTEncoderBlock(int64_t D, int64_t heads, int64_t mlp_dim, Generator& gen) : dim(D) {
    ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(D, 1e-6f));
    self_attention = register_module("self_attention", std::make_shared<nn::MultiheadAttention>(D, heads, true, gen));
    ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(D, 1e-6f));
    mlp = register_module("mlp", std::make_shared<nn::Sequential>());
    auto fc1 = mlp->add(std::make_shared<nn::Linear>(D, mlp_dim, true, gen));
    mlp->add(std::make_shared<nn::GELU>());
    mlp->add(std::make_shared<nn::Dropout>(0.f));   // torchvision's slot 2 (p = 0: records nothing)
    auto fc2 = mlp->add(std::make_shared<nn::Linear>(mlp_dim, D, true, gen));
    mlp->add(std::make_shared<nn::Dropout>(0.f));   // slot 4
    for (const auto& fc : {fc1, fc2}) {             // torchvision's MLPBlock init
        nn::init::xavier_uniform_(fc->weight, gen);
        nn::init::normal_(fc->bias, 0.f, 1e-6f, gen);
    }
}

Tensor ViTEncoderBlock::forward(const Tensor& x) { return run(x); }
Tensor ViTEncoderBlock::forward_consuming(Tensor&& x) { return run(std::move(x)); }

Tensor ViTEncoderBlock::run(Tensor x) {
    if (x.dim() != 3 || x.size(2) != dim)
        throw Error(fmt("EncoderBlock(", name(), "): expected input (B, N, ", dim, "), got ", shape_str(x.shape()),
                        "; hint: tokens of the block's width, batch first"));
    Tensor a = (*self_attention)((*ln_1)(x));   // (B, N, D)
    Tensor h = add(std::move(x), a);            // (B, N, D), in x's buffer where nothing else holds it
    a = Tensor();
    Tensor m = (*mlp)((*ln_2)(h));              // (B, N, D)
    return add(std::move(h), m);
}

ViTEncoder::ViTEncoder(const ImageNetViTConfig& c, int64_t tokens, Generator& gen) {
    Tensor pos = Tensor::empty({1, tokens, c.hidden_dim});
    nn::init::normal_(pos, 0.f, 0.02f, gen);
    pos_embedding = register_parameter("pos_embedding", pos);
    layers = register_module("layers", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < c.num_layers; ++i)
        layers->add(fmt("encoder_layer_", i), std::make_shared<ViTEncoderBlock>(c.hidden_dim, c.num_heads, c.mlp_dim, gen));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(c.hidden_dim, 1e-6f));
}

namespace {
void check_tokens(const ViTEncoder& e, const Tensor& x) {
    if (x.dim() != 3 || x.size(1) != e.pos_embedding.size(1))
        throw Error(fmt("Encoder(", e.name(), "): expected (B, ", e.pos_embedding.size(1), ", D) tokens, got ",
                        shape_str(x.shape()), "; hint: the position embedding fixes the image size"));
}
}  // namespace

Tensor ViTEncoder::forward(const Tensor& x) {
    check_tokens(*this, x);
    return (*ln)((*layers)(add(x, pos_embedding)));   // (B, N, D)
}

Tensor ViTEncoder::forward_consuming(Tensor&& x) {
    check_tokens(*this, x);
    return (*ln)((*layers)(add(std::move(x), pos_embedding)));
}

ImageNetViT::ImageNetViT(const ImageNetViTConfig& c, int64_t classes, Generator& gen) : config(c) {
    if (c.patch_size < 1 || c.image_size % c.patch_size != 0 || c.num_layers < 1 || c.num_heads < 1 ||
        c.hidden_dim % c.num_heads != 0)
        throw Error(fmt("VisionTransformer: image_size ", c.image_size, " must be a multiple of patch_size ",
                        c.patch_size, ", num_layers (", c.num_layers, ") >= 1 and hidden_dim ", c.hidden_dim,
                        " a multiple of num_heads ", c.num_heads, "; hint: vit_b_16 is 224 px, patch 16, 768 / 12"));
    const int64_t grid = c.image_size / c.patch_size, D = c.hidden_dim;
    // Registration order = torchvision's named_parameters order: class_token, conv_proj, encoder, heads.
    class_token = register_parameter("class_token", Tensor::zeros({1, 1, D}));
    conv_proj = register_module("conv_proj", std::make_shared<nn::Conv2d>(
                                                 c.in_channels, D,
                                                 nn::Conv2dConfig{.kernel_size = c.patch_size, .stride = c.patch_size}, gen));
    nn::init::normal_(conv_proj->weight, 0.f, static_cast<float>(std::sqrt(1.0 / nn::init::fan_in(conv_proj->weight))), gen);
    conv_proj->bias.detach().zero_();
    encoder = register_module("encoder", std::make_shared<ViTEncoder>(c, grid * grid + 1, gen));
    heads = register_module("heads", std::make_shared<nn::Sequential>());
    head = heads->add("head", std::make_shared<nn::Linear>(D, classes, true, gen));
    head->weight.detach().zero_();
    head->bias.detach().zero_();
}

Tensor ImageNetViT::forward(const Tensor& x) {
    if (x.dim() != 4 || x.size(1) != config.in_channels || x.size(2) != config.image_size ||
        x.size(3) != config.image_size)
        throw Error(fmt("VisionTransformer(", name(), "): expected input (B, ", config.in_channels, ", ",
                        config.image_size, ", ", config.image_size, "), got ", shape_str(x.shape()),
                        "; hint: build the model for this image size (--image-size)"));
    const int64_t B = x.size(0), D = config.hidden_dim;
    Tensor tokens;                                                            // (B, N, D)
    {   // the patch embeddings die here: the encoder owns the only copy of the tokens
        const Tensor patches = transpose(flatten((*conv_proj)(x), 2), 1, 2);   // (B, D, P) -> (B, P, D), a view
        const Tensor cls = add(Tensor::zeros({B, 1, D}), class_token);        // (B, 1, D): class_token broadcast
        tokens = concat({cls, patches}, 1);
    }
    const Tensor h = (*encoder)(std::move(tokens));                           // (B, N, D)
    // The class token's row, copied out (a slice would keep h's whole storage alive on the tape through head's input).
    return (*heads)(reshape(index_select(h, 1, Tensor::zeros({1}, DType::I64)), {B, D}));   // (B, classes)
}

}  // namespace razor::models
