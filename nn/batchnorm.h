// nn/batchnorm.h -- BatchNorm2d(num_features): batch statistics in train(), running statistics in eval().
//
// reference: torch.nn.BatchNorm2d (eps 1e-5, momentum 0.1, affine, track_running_stats). State dict keys as PyTorch:
// weight, bias, running_mean, running_var, num_batches_tracked (i64).
#pragma once

#include "nn/module.h"

namespace razor::nn {

class BatchNorm2d : public Module {
public:
    explicit BatchNorm2d(int64_t num_features, float eps = 1e-5f, float momentum = 0.1f, bool affine = true);
    Tensor forward(const Tensor& x) override;
    // relu(forward(x)) as one fused op (core/ops/batch_norm.h batch_norm_relu): same values and saves, fewer passes
    // over memory. Runs in this module's scope (its name, save policy and forward observer), as operator() does.
    Tensor forward_relu(const Tensor& x);
    std::string type_name() const override { return "BatchNorm2d"; }

    Tensor weight, bias;                       // (C) or undefined when affine = false
    Tensor running_mean, running_var;          // (C)
    Tensor num_batches_tracked;                // () i64
    int64_t num_features;
    float eps, momentum;

private:
    void begin_forward(const Tensor& x);   // checks x, counts the batch in training
};

}  // namespace razor::nn
