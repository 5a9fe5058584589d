// core/ops/unary.h -- element-wise math: neg, exp, log, sqrt, pow (scalar exponent), tanh, sigmoid.
//
// reference: torch.neg / exp / log / sqrt / pow(Tensor, float) / tanh / sigmoid. docs: docs/ops.md.
// Saves (details in unary.cpp): neg nothing; exp, sqrt, tanh, sigmoid their output; log and pow their input.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "core/tensor.h"

namespace razor {

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, float exponent);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);

// A kernel helper, not an op: e^x in float32 without a libm call, so loops over it vectorise (glibc's expf
// only vectorises under -ffast-math). Used by exp, sigmoid, softmax, log_softmax and cross_entropy.
// Method (Cephes expf): x = k ln2 + r with k = round(x / ln2), |r| <= ln2/2; e^r by a degree-7 polynomial;
// 2^k built from exponent bits in two halves so that k = -126..128 stays in range. Relative error < 1.5e-7
// (measured 8.1e-8 against double exp; tests/core/ops/test_unary.cpp checks it). x > 88.72 gives +inf, x < -87.34 gives 0
// (libm would give a subnormal below 1.2e-38), NaN stays NaN.
inline float exp_kernel(float x) {
    constexpr float lo = -87.33654475f, hi = 88.72283905f;   // ln(FLT_MIN), ln(FLT_MAX)
    const float xc = std::min(hi, std::max(lo, x));   // in this order NaN clamps to lo: no NaN reaches the int cast
    // k = round(x / ln2) by the 1.5 * 2^23 trick (std::floor would block GCC's vectoriser without -ffast-math)
    constexpr float round_magic = 12582912.f;
    const float k = (xc * 1.44269504088896341f + round_magic) - round_magic;
    const float r = (xc - k * 0.693359375f) + k * 2.12194440e-4f;   // ln2 split in two for an exact k*ln2
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.f;
    const int32_t ki = static_cast<int32_t>(k);
    const int32_t k1 = ki >> 1, k2 = ki - k1;   // 2^k = 2^k1 * 2^k2, each a normal float
    const float s1 = std::bit_cast<float>((k1 + 127) << 23);
    const float s2 = std::bit_cast<float>((k2 + 127) << 23);
    float y = p * s1 * s2;
    y = x > hi ? std::numeric_limits<float>::infinity() : y;
    y = x < lo ? 0.f : y;
    return x != x ? x : y;
}

}  // namespace razor
