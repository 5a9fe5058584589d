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

ChannelTensor Linear::forward_subset(const ChannelTensor& x) {
    const std::string who = fmt("Linear(", name(), ")");
    const int64_t last = x.x.dim() - 1;
    check_channels(x, in_features, last, who);
    const std::vector<int64_t>* kept = current_kept_channels(out_features, who);
    const std::vector<int64_t> out = kept ? *kept : iota_channels(out_features);
    const int64_t O = static_cast<int64_t>(out.size()), I = static_cast<int64_t>(x.channels.size());
    const bool all_in = I == in_features, all_out = O == out_features;
    if (auto* scope = ChannelSubsetScope::current()) scope->count(O * I, out_features * in_features);
    if (all_in && all_out) return {forward(x.x), out};   // the plain op
    Tensor b;
    if (bias.defined()) b = all_out ? bias : index_select(bias, 0, index_tensor(out));
    if (O == 0 || I == 0) {   // nothing kept or nothing to read: zeros (plus b[O])
        Shape s = x.x.shape();
        s[static_cast<size_t>(last)] = O;
        Tensor y = Tensor::zeros(s);
        return {b.defined() && O > 0 ? add(y, b) : y, out};
    }
    Tensor W = weight;                                                // (out, in)
    if (!all_out) W = index_select(W, 0, index_tensor(out));          // (O, in)
    if (!all_in) W = index_select(W, 1, index_tensor(x.channels));    // (O, I)
    return {linear(x.x, W, b), out};                                  // (..., O)
}

}  // namespace razor::nn
