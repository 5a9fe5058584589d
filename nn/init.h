// nn/init.h -- parameter initialisers, as torch.nn.init. All draw from a razor Generator (seeded, reproducible).
#pragma once

#include <cmath>

#include "core/core.h"

namespace razor::nn::init {

// fan_in = size(1) * receptive field (product of dims 2..), fan_out = size(0) * receptive field.
inline int64_t fan_in(const Tensor& w) { return w.numel() / w.size(0); }
inline int64_t fan_out(const Tensor& w) { return w.dim() > 1 ? w.numel() / w.size(1) : w.numel(); }

inline void uniform_(Tensor& t, float lo, float hi, Generator& gen) {
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = gen.uniform(lo, hi);
}
inline void normal_(Tensor& t, float mean, float stddev, Generator& gen) {
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = gen.normal(mean, stddev);
}
// PyTorch's default for Linear and Conv weights: kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
inline void default_weight_(Tensor& w, Generator& gen) {
    const float bound = 1.f / std::sqrt(static_cast<float>(fan_in(w)));
    uniform_(w, -bound, bound, gen);
}
// PyTorch's default bias: U(-1/sqrt(fan_in of the weight), +).
inline void default_bias_(Tensor& b, int64_t weight_fan_in, Generator& gen) {
    const float bound = weight_fan_in > 0 ? 1.f / std::sqrt(static_cast<float>(weight_fan_in)) : 0.f;
    uniform_(b, -bound, bound, gen);
}
// kaiming_normal_(mode='fan_in' or 'fan_out', nonlinearity='relu'): N(0, 2 / fan).
inline void kaiming_normal_(Tensor& w, Generator& gen, bool mode_fan_out = false) {
    const float fan = static_cast<float>(mode_fan_out ? fan_out(w) : fan_in(w));
    normal_(w, 0.f, std::sqrt(2.f / fan), gen);
}
// xavier_uniform_: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
inline void xavier_uniform_(Tensor& w, Generator& gen) {
    const float a = std::sqrt(6.f / static_cast<float>(fan_in(w) + fan_out(w)));
    uniform_(w, -a, a, gen);
}

}  // namespace razor::nn::init
