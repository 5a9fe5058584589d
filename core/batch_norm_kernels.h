// core/batch_norm_kernels.h -- BatchNorm backward's AVX-512 and AVX2+FMA row kernels, dispatched at run time.
//
// Defined in core/batch_norm_avx512.cpp and core/batch_norm_avx2.cpp (their own target flags; x86-64 only) from
// the templates in batch_norm_rows.h. Call a family's functions only when isa_supported() says the CPU runs it.
// Each does the whole vector lanes of a run of one channel's values and returns where it stopped: the caller
// (core/ops/batch_norm.cpp) finishes with its scalar loop, which is also the generic family.
#pragma once

#include <cstdint>

namespace razor::detail {

// One channel's inputs to the backward rows. gm = g * (mask bit), all of g when mask is null; x_hat from fp32 x as
// (x - xa) * xb (xa = centre, xb = scale), or from 8-bit codes (x null) as xa + xb * code (xa = off, xb = mul).
struct BnRow {
    const float* g = nullptr;
    const uint64_t* mask = nullptr;
    const float* x = nullptr;
    const uint8_t* codes = nullptr;
    float xa = 0.f, xb = 1.f;
};

// a = Σ gm and b = Σ gm x_hat (when need_gxhat) over [j, end), a lane register at a time from j % width == 0 (else
// nothing is done); returns the first value not summed.
int64_t bn_row_sums_avx512(const BnRow& r, int64_t j, int64_t end, bool need_gxhat, float& a, float& b);
int64_t bn_row_sums_avx2(const BnRow& r, int64_t j, int64_t end, bool need_gxhat, float& a, float& b);

// gx[j..] = k (gm - mean_g - x_hat mean_gxhat), the same way; returns the first value not written.
int64_t bn_row_input_grad_avx512(const BnRow& r, int64_t j, int64_t end, float k, float mean_g, float mean_gxhat,
                                 float* gx);
int64_t bn_row_input_grad_avx2(const BnRow& r, int64_t j, int64_t end, float k, float mean_g, float mean_gxhat,
                               float* gx);

}  // namespace razor::detail
