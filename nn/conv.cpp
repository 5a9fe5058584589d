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

namespace {
Conv2dOptions options_of(const Conv2dConfig& c) {
    Conv2dOptions o;
    o.stride = {c.stride, c.stride};
    o.padding = {c.padding, c.padding};
    o.dilation = {c.dilation, c.dilation};
    o.groups = c.groups;
    return o;
}
}  // namespace

Tensor Conv2d::forward(const Tensor& x) {
    if (x.dim() != 4 || x.size(1) != in_channels)
        throw Error(fmt("Conv2d(", name(), "): expected input (N, ", in_channels, ", H, W), got ", shape_str(x.shape()),
                        "; hint: check in_channels or the preceding layer"));
    return conv2d(x, weight, bias, options_of(config));
}

ChannelTensor Conv2d::forward_subset(const ChannelTensor& x) {
    const std::string who = fmt("Conv2d(", name(), ")");
    check_channels(x, in_channels, 1, who);
    if (x.x.dim() != 4)
        throw Error(fmt(who, ": expected input (N, C, H, W), got ", shape_str(x.x.shape())));
    const std::vector<int64_t>* kept = current_kept_channels(out_channels, who);
    const std::vector<int64_t> out = kept ? *kept : iota_channels(out_channels);
    const int64_t O = static_cast<int64_t>(out.size()), I = static_cast<int64_t>(x.channels.size());
    const bool all_in = I == in_channels, all_out = O == out_channels;
    const int64_t k = config.dilation * (config.kernel_size - 1) + 1;
    const Shape ys = {x.x.size(0), O, (x.x.size(2) + 2 * config.padding - k) / config.stride + 1,
                      (x.x.size(3) + 2 * config.padding - k) / config.stride + 1};
    if (auto* scope = ChannelSubsetScope::current()) {
        const int64_t per_out = config.kernel_size * config.kernel_size * ys[2] * ys[3] / config.groups;
        scope->count(O * I * per_out, out_channels * in_channels * per_out);
    }
    if (all_in && all_out) return {forward(x.x), out};   // the plain op
    if (config.groups != 1)
        throw Error(fmt(who, ": a channel subset of a grouped conv (groups ", config.groups, ") is not supported; "
                        "hint: keep all of its channels"));
    // Nothing kept, or nothing to read: the dense network with zeroed channels computes zeros here (plus b[O]).
    if (O == 0 || I == 0) {
        Tensor y = Tensor::zeros(ys);
        if (O > 0 && bias.defined()) y = add(y, reshape(index_select(bias, 0, index_tensor(out)), {1, O, 1, 1}));
        return {y, out};
    }
    Tensor W = weight;                                                // (OC, C, K, K)
    if (!all_out) W = index_select(W, 0, index_tensor(out));          // (O, C, K, K)
    if (!all_in) W = index_select(W, 1, index_tensor(x.channels));    // (O, I, K, K)
    Tensor b;
    if (bias.defined()) b = all_out ? bias : index_select(bias, 0, index_tensor(out));
    return {conv2d(x.x, W, b, options_of(config)), out};              // (N, O, OH, OW)
}

}  // namespace razor::nn
