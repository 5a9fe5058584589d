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

Tensor TransformerBlock::forward(const Tensor& x) { return run(x); }
Tensor TransformerBlock::forward_consuming(Tensor&& x) { return run(std::move(x)); }

Tensor TransformerBlock::run(Tensor x) {
    if (x.dim() != 3 || x.size(2) != dim)
        throw Error(fmt("TransformerBlock(", name(), "): expected input (B, N, ", dim, "), got ", shape_str(x.shape()),
                        "; hint: tokens of the block's width, batch first"));
    Tensor a = (*attn)((*ln1)(x));               // (B, N, D)
    Tensor h = add(std::move(x), a);             // (B, N, D), in x's buffer where nothing else holds it
    a = Tensor();
    Tensor m = (*fc2)((*act)((*fc1)((*ln2)(h))));   // (B, N, D); GELU writes over fc1's output where it may
    return add(std::move(h), m);
}

}  // namespace razor::nn
