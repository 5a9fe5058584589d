// nn/linear.cpp -- see linear.h.
#include "nn/linear.h"

#include <cmath>

namespace razor::nn {

Linear::Linear(int64_t in, int64_t out, bool has_bias, Generator& gen) : in_features(in), out_features(out) {
    const float bound = 1.f / std::sqrt(static_cast<float>(in));
    Tensor w = Tensor::empty({out, in});
    for (int64_t i = 0; i < w.numel(); ++i) w.f32()[i] = gen.uniform(-bound, bound);
    weight = register_parameter("weight", w);
    if (has_bias) {
        Tensor b = Tensor::empty({out});
        for (int64_t i = 0; i < out; ++i) b.f32()[i] = gen.uniform(-bound, bound);
        bias = register_parameter("bias", b);
    }
}

Tensor Linear::forward(const Tensor& x) {
    if (x.dim() < 1 || x.size(-1) != in_features)
        throw Error(fmt("Linear(", name(), "): expected input (..., ", in_features, "), got ", shape_str(x.shape()),
                        "; hint: check in_features or the preceding layer (flatten images first)"));
    return linear(x, weight, bias);
}

}  // namespace razor::nn
