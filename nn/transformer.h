// nn/transformer.h -- TransformerBlock(dim, heads, mlp_ratio): the pre-norm ViT encoder block.
//
//     x = x + attn(ln1(x))
//     x = x + fc2(gelu(fc1(ln2(x))))
//
// reference: the block of timm's VisionTransformer / torch.nn.TransformerEncoderLayer(norm_first=True,
// activation="gelu", dropout=0), with children named ln1, attn, ln2, fc1, act, fc2 (the reference definition is
// scripts/fixtures/ops_models.py `Block`). docs: docs/models.md "Attention".
//
// Dimension letters: B batch, N tokens, D = dim; the MLP's hidden width is mlp_ratio * D.
//
// Children: ln1, ln2 LayerNorm(D); attn MultiheadAttention(D, heads, bias); fc1 Linear(D, mlp_ratio D);
// act GELU (exact erf form, as nn.GELU()); fc2 Linear(mlp_ratio D, D). No dropout.
#pragma once

#include "nn/attention.h"
#include "nn/layernorm.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace razor::nn {

class TransformerBlock : public Module {
public:
    TransformerBlock(int64_t dim, int64_t heads, int64_t mlp_ratio = 4, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // x: (B, N, D) -> (B, N, D)
    // The same; the residual stream is carried in x's buffer, each sum written over the stream the caller gave up.
    Tensor forward_consuming(Tensor&& x) override;
    std::string type_name() const override { return "TransformerBlock"; }

    std::shared_ptr<LayerNorm> ln1;
    std::shared_ptr<MultiheadAttention> attn;
    std::shared_ptr<LayerNorm> ln2;
    std::shared_ptr<Linear> fc1;
    std::shared_ptr<GELU> act;
    std::shared_ptr<Linear> fc2;
    int64_t dim;

private:
    Tensor run(Tensor x);   // forward's body; x is this call's own handle
};

}  // namespace razor::nn
