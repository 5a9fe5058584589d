// nn/batchnorm.h -- BatchNorm2d(num_features): batch statistics in train(), running statistics in eval().
//
// reference: torch.nn.BatchNorm2d (eps 1e-5, momentum 0.1, affine, track_running_stats). State dict keys as PyTorch:
// weight, bias, running_mean, running_var, num_batches_tracked (i64).
//
// On a channel subset (forward_subset, nn/channel_subset.h) it is TRUE-SPARSE: x holds channels K only, and
// y = BN(x) with γ[K], β[K] and the running statistics of K; in training the batch statistics of K update
// running_mean[K] and running_var[K] (the other channels' stay as they were) and num_batches_tracked counts the
// batch. A dropped channel is absent: it contributes exactly 0 downstream and its parameters get no gradient.
// (The emulation that multiplies a conv's weight by the mask and runs dense BN would output β_c on a dropped
// channel; razor does not implement it.)
#pragma once

#include "nn/module.h"

namespace razor::nn {

class BatchNorm2d : public Module {
public:
    explicit BatchNorm2d(int64_t num_features, float eps = 1e-5f, float momentum = 0.1f, bool affine = true);
    Tensor forward(const Tensor& x) override;
    // For an x the caller gives up: y is written over x in eval mode with frozen weights (--freeze-bn), and in
    // training when the save policy keeps a code or copy of x rather than x itself (Back Razor's BN inputs).
    Tensor forward_consuming(Tensor&& x) override;
    // relu(forward(x)) as one fused op (core/ops/batch_norm.h batch_norm_relu): same values and saves, fewer passes
    // over memory. Runs in this module's scope (its name, save policy and forward observer), as operator() does.
    Tensor forward_relu(const Tensor& x);
    Tensor forward_relu(Tensor&& x);   // the same for an x the caller gives up (bn.forward_relu(conv(x)))
    // The same two on a channel subset x (N, |K|, H, W) holding channels K (true-sparse, above); the plain forward
    // when K is every channel.
    ChannelTensor forward_subset(const ChannelTensor& x) override;
    ChannelTensor forward_relu(const ChannelTensor& x);
    std::string type_name() const override { return "BatchNorm2d"; }

    Tensor weight, bias;                       // (C) or undefined when affine = false
    Tensor running_mean, running_var;          // (C)
    Tensor num_batches_tracked;                // () i64
    int64_t num_features;
    float eps, momentum;

private:
    void begin_forward(const Tensor& x);   // checks x, counts the batch in training
    ChannelTensor subset(const ChannelTensor& x, bool relu);
};

}  // namespace razor::nn
