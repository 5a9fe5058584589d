// nn/conv.h -- Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias).
//
// reference: torch.nn.Conv2d (NCHW; PyTorch's default init: weight and bias ~ U(-1/sqrt(fan_in), +)).
// The layer takes channel counts, never input geometry (H, W are read from the input).
// forward_subset: the conv on a channel subset (nn/channel_subset.h), groups = 1 only when the subset is partial.
#pragma once

#include "nn/module.h"

namespace razor::nn {

struct Conv2dConfig {
    int64_t kernel_size = 3;
    int64_t stride = 1;
    int64_t padding = 0;
    int64_t dilation = 1;
    int64_t groups = 1;
    bool bias = true;
};

class Conv2d : public Module {
public:
    Conv2d(int64_t in_channels, int64_t out_channels, Conv2dConfig config = {}, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;
    // x: (N, |I|, H, W) holding input channels I -> (N, |O|, OH, OW) holding the kept output channels O of the
    // current ChannelSubsetScope (all when none): conv(x, W[O][:, I]) (+ bias[O]). Adds its MACs to the scope.
    ChannelTensor forward_subset(const ChannelTensor& x) override;
    std::string type_name() const override { return "Conv2d"; }

    Tensor weight;   // (OC, IC / groups, K, K)
    Tensor bias;     // (OC) or undefined
    int64_t in_channels, out_channels;
    Conv2dConfig config;
};

}  // namespace razor::nn
