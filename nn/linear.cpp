// nn/linear.cpp -- see linear.h.
#include "nn/linear.h"

#include "nn/init.h"

namespace razor::nn {

Linear::Linear(int64_t in, int64_t out, bool has_bias, Generator& gen) : in_features(in), out_features(out) {
    Tensor w = Tensor::empty({out, in});
    init::default_weight_(w, gen);
    weight = register_parameter("weight", w);
    if (has_bias) {
        Tensor b = Tensor::empty({out});
        init::default_bias_(b, in, gen);
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
