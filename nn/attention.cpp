// nn/attention.cpp -- see attention.h.
#include "nn/attention.h"

#include <cmath>

#include "nn/init.h"

namespace razor::nn {

MultiheadAttention::MultiheadAttention(int64_t D, int64_t h, bool bias, Generator& gen)
    : embed_dim(D), num_heads(h), head_dim(h > 0 ? D / h : 0) {
    if (D <= 0 || h <= 0 || D % h != 0)
        throw Error(fmt("MultiheadAttention: embed_dim ", D, " must be a positive multiple of num_heads ", h,
                        "; hint: the head dimension is embed_dim / num_heads"));
    Tensor w = Tensor::empty({3 * D, D});
    init::xavier_uniform_(w, gen);
    in_proj_weight = register_parameter("in_proj_weight", w);
    if (bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::zeros({3 * D}));
    // PyTorch registers out_proj after the in-projection and then zeroes its bias (_reset_parameters).
    out_proj = register_module("out_proj", std::make_shared<Linear>(D, D, bias, gen));
    if (bias) out_proj->bias.detach().zero_();
}

Tensor MultiheadAttention::forward(const Tensor& x) { return attend(x); }
Tensor MultiheadAttention::forward_consuming(Tensor&& x) { return attend(std::move(x)); }

Tensor MultiheadAttention::attend(Tensor x) {
    if (x.dim() != 3 || x.size(2) != embed_dim)
        throw Error(fmt("MultiheadAttention(", name(), "): expected input (B, N, ", embed_dim, "), got ",
                        shape_str(x.shape()), "; hint: batch_first tokens of width embed_dim"));
    const int64_t B = x.size(0), N = x.size(1), D = embed_dim, h = num_heads, d = head_dim;
    Tensor qkv = linear(x, in_proj_weight, in_proj_bias);   // (B, N, 3D)
    x = Tensor();                                           // freed here when the caller gave it up
    // One head's q, k, v are strided views of qkv: columns [0, D), [D, 2D), [2D, 3D) split into h groups of d.
    auto heads = [&](int64_t part) {                        // -> (B, h, N, d), a view
        return transpose(reshape(slice(qkv, 2, part * D, (part + 1) * D), {B, N, h, d}), 1, 2);
    };
    // q, k and v are packed into buffers of their own at once, so that qkv (3 activations wide) goes before the
    // (B, h, N, N) scores exist; each then goes as soon as its last op has run (the tape keeps its own copy, or,
    // under the dense policy, holds the buffer itself). vit_b_16 at batch 16: 28 MiB off the forward's peak.
    Tensor q = mul(heads(0), 1.f / std::sqrt(static_cast<float>(d)));   // (B, h, N, d), packed
    Tensor k = heads(1).contiguous();                                   // (B, h, N, d)
    Tensor v = heads(2).contiguous();                                   // (B, h, N, d)
    qkv = Tensor();
    Tensor p = softmax(matmul(q, transpose(k, 2, 3)), -1);  // (B, h, N, N), written over the scores: row i
    q = Tensor(), k = Tensor();                             // attends over keys j
    Tensor o = matmul(p, v);                                // (B, h, N, d)
    p = Tensor(), v = Tensor();
    Tensor merged = reshape(transpose(o, 1, 2), {B, N, D}); // heads side by side: (B, N, D), a copy
    o = Tensor();
    return (*out_proj)(std::move(merged));
}

}  // namespace razor::nn
