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

void BatchNorm2d::begin_forward(const Tensor& x) {
    if (x.dim() != 4 || x.size(1) != num_features)
        throw Error(fmt("BatchNorm2d(", name(), "): expected input (N, ", num_features, ", H, W), got ",
                        shape_str(x.shape()), "; hint: num_features must equal the preceding conv's out_channels"));
    if (is_training()) {
        ++num_batches_tracked.i64()[0];
        num_batches_tracked.bump_version();
    }
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

}  // namespace razor::nn
