// core/batch_norm_kernels.h -- BatchNorm backward's AVX-512 and AVX2+FMA row kernels, dispatched at run time.
//
// Defined in core/batch_norm_avx512.cpp and core/batch_norm_avx2.cpp (their own target flags; x86-64 only) from
// the templates in batch_norm_rows.h; each hands back its pair as a BnRowKernels table. Call a family's kernels
// only when isa_supported() says the CPU runs it. The caller (core/ops/batch_norm.cpp) finishes each run with its
// scalar loop, which is also the generic family.
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

// One family's two row kernels. Each does the whole lane registers of [j, end) from j % width == 0 (else nothing)
// and returns the first value it did not do:
//   sums        a = Σ gm and b = Σ gm x_hat (b only when need_gxhat)
//   input_grad  gx[j..] = k (gm - mean_g - x_hat mean_gxhat)
struct BnRowKernels {
    int64_t (*sums)(const BnRow& r, int64_t j, int64_t end, bool need_gxhat, float& a, float& b);
    int64_t (*input_grad)(const BnRow& r, int64_t j, int64_t end, float k, float mean_g, float mean_gxhat, float* gx);
};
BnRowKernels bn_row_kernels_avx512();
BnRowKernels bn_row_kernels_avx2();

}  // namespace razor::detail
