// models/vit.cpp -- see vit.h.
#include "models/vit.h"

#include "nn/init.h"

namespace razor::models {

VisionTransformer::VisionTransformer(const ViTConfig& c, int64_t classes, Generator& gen) : config(c) {
    if (c.patch_size < 1 || c.image_size % c.patch_size != 0 || c.depth < 1)
        throw Error(fmt("VisionTransformer: image_size ", c.image_size, " must be a multiple of patch_size ",
                        c.patch_size, " and depth (", c.depth, ") >= 1; hint: vit_tiny uses 32x32 images, patch 4"));
    const int64_t grid = c.image_size / c.patch_size, N = grid * grid + 1, D = c.dim;
    // Parameters first, then children: the order PyTorch's named_parameters() gives for the reference.
    Tensor cls = Tensor::empty({1, 1, D}), pos = Tensor::empty({1, N, D});
    nn::init::normal_(cls, 0.f, 0.02f, gen);
    nn::init::normal_(pos, 0.f, 0.02f, gen);
    cls_token = register_parameter("cls_token", cls);
    pos_embed = register_parameter("pos_embed", pos);
    patch_embed = register_module(
        "patch_embed", std::make_shared<nn::Conv2d>(c.in_channels, D,
                                                    nn::Conv2dConfig{.kernel_size = c.patch_size, .stride = c.patch_size}, gen));
    blocks = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < c.depth; ++i) blocks->add(std::make_shared<nn::TransformerBlock>(D, c.heads, c.mlp_ratio, gen));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(D));
    head = register_module("head", std::make_shared<nn::Linear>(D, classes, true, gen));
}

Tensor VisionTransformer::forward(const Tensor& x) {
    if (x.dim() != 4 || x.size(1) != config.in_channels || x.size(2) != config.image_size ||
        x.size(3) != config.image_size)
        throw Error(fmt("VisionTransformer(", name(), "): expected input (B, ", config.in_channels, ", ",
                        config.image_size, ", ", config.image_size, "), got ", shape_str(x.shape()),
                        "; hint: the position embeddings fix the image size"));
    const int64_t B = x.size(0), D = config.dim;
    Tensor h;                                                                // (B, N, D)
    {   // the patch embeddings die here: the blocks own the only copy of the tokens
        const Tensor patches = transpose(flatten((*patch_embed)(x), 2), 1, 2);   // (B, D, P) -> (B, P, D), a view
        const Tensor cls = add(Tensor::zeros({B, 1, D}), cls_token);            // (B, 1, D): cls_token broadcast
        h = add(concat({cls, patches}, 1), pos_embed);
    }
    h = (*blocks)(std::move(h));
    // Only the class token reaches the head, and LayerNorm is per token, so normalising just that row gives
    // the reference's norm(x)[:, 0] exactly. index_select copies the row out: a slice would be a view that keeps
    // all of h's (B, N, D) storage alive on the tape through norm's saved input.
    h = (*norm)(reshape(index_select(h, 1, Tensor::zeros({1}, DType::I64)), {B, D}));   // (B, D)
    return (*head)(h);                                                       // (B, classes)
}

}  // namespace razor::models
