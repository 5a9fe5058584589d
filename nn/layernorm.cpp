// nn/layernorm.cpp -- see layernorm.h.
#include "nn/layernorm.h"

namespace razor::nn {

LayerNorm::LayerNorm(int64_t d, float eps_) : dim(d), eps(eps_) {
    weight = register_parameter("weight", Tensor::ones({d}));
    bias = register_parameter("bias", Tensor::zeros({d}));
}

Tensor LayerNorm::forward(const Tensor& x) {
    if (x.dim() < 1 || x.size(-1) != dim)
        throw Error(fmt("LayerNorm(", name(), "): expected input (..., ", dim, "), got ", shape_str(x.shape()),
                        "; hint: normalized_shape must equal the model width"));
    return layer_norm(x, weight, bias, eps);
}

}  // namespace razor::nn
