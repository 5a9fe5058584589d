// nn/batchnorm.cpp -- see batchnorm.h.
#include "nn/batchnorm.h"

namespace razor::nn {

BatchNorm2d::BatchNorm2d(int64_t c, float eps_, float momentum_, bool affine)
    : num_features(c), eps(eps_), momentum(momentum_) {
    if (affine) {
        weight = register_parameter("weight", Tensor::ones({c}));
        bias = register_parameter("bias", Tensor::zeros({c}));
    }
    running_mean = register_buffer("running_mean", Tensor::zeros({c}));
    running_var = register_buffer("running_var", Tensor::ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::I64));
}

namespace {
void count_batch(Tensor& num_batches_tracked) {
    ++num_batches_tracked.i64()[0];
    num_batches_tracked.bump_version();
}
}  // namespace

void BatchNorm2d::begin_forward(const Tensor& x) {
    if (x.dim() != 4 || x.size(1) != num_features)
        throw Error(fmt("BatchNorm2d(", name(), "): expected input (N, ", num_features, ", H, W), got ",
                        shape_str(x.shape()), "; hint: num_features must equal the preceding conv's out_channels"));
    if (is_training()) count_batch(num_batches_tracked);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
    begin_forward(x);
    return batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps);
}

Tensor BatchNorm2d::forward_relu(const Tensor& x) {
    return call(x, [&] {
        begin_forward(x);
        return batch_norm_relu(x, weight, bias, running_mean, running_var, is_training(), momentum, eps);
    });
}

Tensor BatchNorm2d::forward_consuming(Tensor&& x) {
    begin_forward(x);
    return batch_norm(std::move(x), weight, bias, running_mean, running_var, is_training(), momentum, eps);
}

Tensor BatchNorm2d::forward_relu(Tensor&& x) {
    return call(x, [&] {
        begin_forward(x);
        return batch_norm_relu(std::move(x), weight, bias, running_mean, running_var, is_training(), momentum, eps);
    });
}

}  // namespace razor::nn

namespace razor::nn {

ChannelTensor BatchNorm2d::forward_subset(const ChannelTensor& x) { return subset(x, false); }

ChannelTensor BatchNorm2d::forward_relu(const ChannelTensor& x) {
    return call(x, [&] { return subset(x, true); });
}

ChannelTensor BatchNorm2d::subset(const ChannelTensor& x, bool relu) {
    using Op = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, float, float);
    const Op op = relu ? static_cast<Op>(batch_norm_relu) : static_cast<Op>(batch_norm);
    if (static_cast<int64_t>(x.channels.size()) == num_features) {   // every channel: the plain forward
        begin_forward(x.x);
        return {op(x.x, weight, bias, running_mean, running_var, is_training(), momentum, eps), x.channels};
    }
    check_channels(x, num_features, 1, fmt("BatchNorm2d(", name(), ")"));
    if (x.x.dim() != 4)
        throw Error(fmt("BatchNorm2d(", name(), "): expected input (N, C, H, W), got ", shape_str(x.x.shape())));
    const bool training = is_training();
    if (training) count_batch(num_batches_tracked);
    if (x.channels.empty()) return x;
    // x: (N, |K|, H, W); γ[K], β[K] gathered with autograd (their gradients scatter into the full γ, β grads), the
    // running statistics of K gathered without (the op updates these copies in training).
    const Tensor idx = index_tensor(x.channels);
    Tensor w, b, mean, var;
    if (weight.defined()) w = index_select(weight, 0, idx), b = index_select(bias, 0, idx);
    {
        NoGradGuard no_grad;
        mean = index_select(running_mean, 0, idx);
        var = index_select(running_var, 0, idx);
    }
    Tensor y = op(x.x, w, b, mean, var, training, momentum, eps);
    if (training) {
        // the kept channels' updated statistics back into the buffers; the dropped channels' stay as they were
        float* rm = running_mean.f32();
        float* rv = running_var.f32();
        const float* m = mean.f32();
        const float* v = var.f32();
        for (size_t i = 0; i < x.channels.size(); ++i) rm[x.channels[i]] = m[i], rv[x.channels[i]] = v[i];
        running_mean.bump_version();
        running_var.bump_version();
    }
    return {y, x.channels};
}

}  // namespace razor::nn
