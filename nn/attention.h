// nn/attention.h -- MultiheadAttention(embed_dim, num_heads, bias): self-attention over (B, N, D) tokens.
//
// reference: torch.nn.MultiheadAttention(embed_dim, num_heads, bias=bias, batch_first=True), called as
// attn(x, x, x, need_weights=False)[0]. docs: docs/models.md "Attention".
//
// Dimension letters: B batch, N tokens, D = embed_dim, h heads, d = D / h (head dimension).
//
// Parameters and init as PyTorch (so state dicts interoperate):
//   in_proj_weight   (3D, D)  xavier_uniform; rows [0, D) project q, [D, 2D) k, [2D, 3D) v
//   in_proj_bias     (3D)     zeros (only when bias)
//   out_proj.weight  (D, D)   Linear's default init (a child Linear named out_proj)
//   out_proj.bias    (D)      zeros (only when bias)
//
// Forward: qkv = x W_in^T + b_in; per head, softmax(q k^T / sqrt(d)) v; heads concatenated; out_proj. The scale
// 1/sqrt(d) is applied to q (as PyTorch), before the product. No dropout, no masks, no cross-attention: razor's
// models only need self-attention.
//
// Saves (through the ops it calls): the input x (in_proj's linear), q and the packed qkv (the two attention
// matmuls; k and v are views of qkv, so its storage counts once), the softmax output P (B, h, N, N), and the
// re-packed head output (out_proj's linear).
//
// Memory: each intermediate is let go as soon as its last consumer has run (x after the in-projection, q after the
// scores, qkv and P after P V, the head output after its re-packing), and P is written over the scores
// (softmax(Tensor&&)). At the attention's widest point the step holds qkv, q and one (B, h, N, N) buffer, not also
// x, a second (B, h, N, N) buffer and the head outputs (docs/ops.md has vit_b_16's figures).
#pragma once

#include "nn/linear.h"
#include "nn/module.h"

namespace razor::nn {

class MultiheadAttention : public Module {
public:
    MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // x: (B, N, D) -> (B, N, D)
    Tensor forward_consuming(Tensor&& x) override;   // the same; x's buffer is let go once qkv is computed
    std::string type_name() const override { return "MultiheadAttention"; }

    Tensor in_proj_weight;   // (3D, D)
    Tensor in_proj_bias;     // (3D) or undefined
    std::shared_ptr<Linear> out_proj;
    int64_t embed_dim, num_heads, head_dim;

private:
    Tensor attend(Tensor x);   // forward's body; x is this call's own handle
};

}  // namespace razor::nn
