// nn/conv.cpp -- see conv.h.
#include "nn/conv.h"

#include "nn/init.h"

namespace razor::nn {

Conv2d::Conv2d(int64_t in, int64_t out, Conv2dConfig c, Generator& gen)
    : in_channels(in), out_channels(out), config(c) {
    if (in <= 0 || out <= 0 || c.groups <= 0 || in % c.groups || out % c.groups)
        throw Error(fmt("Conv2d: in_channels ", in, " and out_channels ", out, " must be positive and divisible by groups ",
                        c.groups));
    Tensor w = Tensor::empty({out, in / c.groups, c.kernel_size, c.kernel_size});
    init::default_weight_(w, gen);
    weight = register_parameter("weight", w);
    if (c.bias) {
        Tensor b = Tensor::empty({out});
        init::default_bias_(b, init::fan_in(w), gen);
        bias = register_parameter("bias", b);
    }
}

Tensor Conv2d::forward(const Tensor& x) {
    if (x.dim() != 4 || x.size(1) != in_channels)
        throw Error(fmt("Conv2d(", name(), "): expected input (N, ", in_channels, ", H, W), got ", shape_str(x.shape()),
                        "; hint: check in_channels or the preceding layer"));
    Conv2dOptions o;
    o.stride = {config.stride, config.stride};
    o.padding = {config.padding, config.padding};
    o.dilation = {config.dilation, config.dilation};
    o.groups = config.groups;
    return conv2d(x, weight, bias, o);
}

}  // namespace razor::nn
