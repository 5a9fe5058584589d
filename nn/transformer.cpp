// nn/transformer.cpp -- see transformer.h.
#include "nn/transformer.h"

namespace razor::nn {

TransformerBlock::TransformerBlock(int64_t D, int64_t heads, int64_t mlp_ratio, Generator& gen) : dim(D) {
    if (mlp_ratio <= 0)
        throw Error(fmt("TransformerBlock: mlp_ratio must be >= 1, got ", mlp_ratio, "; hint: ViTs use 4"));
    // Registration order = PyTorch's named_parameters order for the reference Block.
    ln1 = register_module("ln1", std::make_shared<LayerNorm>(D));
    attn = register_module("attn", std::make_shared<MultiheadAttention>(D, heads, true, gen));
    ln2 = register_module("ln2", std::make_shared<LayerNorm>(D));
    fc1 = register_module("fc1", std::make_shared<Linear>(D, mlp_ratio * D, true, gen));
    act = register_module("act", std::make_shared<GELU>());
    fc2 = register_module("fc2", std::make_shared<Linear>(mlp_ratio * D, D, true, gen));
}

Tensor TransformerBlock::forward(const Tensor& x) {
    if (x.dim() != 3 || x.size(2) != dim)
        throw Error(fmt("TransformerBlock(", name(), "): expected input (B, N, ", dim, "), got ", shape_str(x.shape()),
                        "; hint: tokens of the block's width, batch first"));
    const Tensor h = add(x, (*attn)((*ln1)(x)));                       // (B, N, D)
    return add(h, (*fc2)((*act)((*fc1)((*ln2)(h)))));                 // (B, N, D)
}

}  // namespace razor::nn
