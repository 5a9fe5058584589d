// nn/linear.h -- Linear(in_features, out_features, bias): y = x W^T + b.   reference: torch.nn.Linear
//
// Init as PyTorch: W, b ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with a = sqrt(5) reduces to this bound).
#pragma once

#include "nn/module.h"

namespace razor::nn {

class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;
    // x: (..., |I|) holding input features I -> (..., |O|) holding the kept outputs O of the current
    // ChannelSubsetScope (all when none): x W[O][:, I]^T + b[O]. Adds its MACs to the scope.
    ChannelTensor forward_subset(const ChannelTensor& x) override;
    std::string type_name() const override { return "Linear"; }

    Tensor weight;   // (out, in)
    Tensor bias;     // (out) or undefined
    int64_t in_features, out_features;
};

}  // namespace razor::nn
