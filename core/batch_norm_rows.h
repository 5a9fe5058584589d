// core/batch_norm_rows.h -- BatchNorm backward's two vector row loops, written once over a `Lanes` type (16 floats
// of AVX-512, 8 of AVX2+FMA), for the kernel files core/batch_norm_avx512.cpp and core/batch_norm_avx2.cpp.
//
// Templates only: each kernel file instantiates them with its own Lanes (an anonymous-namespace type, so the
// instances have internal linkage and no AVX code is shared with baseline files; CMakeLists.txt "kernel families").
// core/ops/batch_norm.cpp calls the family's functions (batch_norm_kernels.h) and finishes each run's tail with its
// scalar loops, which also are the generic family. The formulas and their derivation: core/ops/batch_norm.cpp.
#pragma once

#include <cstdint>

#include "core/batch_norm_kernels.h"

namespace razor::detail {

// x_hat of values j.. of one channel, Lanes::width at a time: (x - centre) * scale from fp32 x, or off + mul * code
// from per-channel 8-bit codes.
template <class Lanes>
typename Lanes::V bn_xhat(const BnRow& r, int64_t j) {
    if (r.codes) return Lanes::fmadd(Lanes::widen(r.codes + j), Lanes::set1(r.xb), Lanes::set1(r.xa));
    return Lanes::mul(Lanes::sub(Lanes::load(r.x + j), Lanes::set1(r.xa)), Lanes::set1(r.xb));
}

// a = Σ gm, b = Σ gm x_hat (b only when need_gxhat) over the whole lanes of [j, end); returns where it stopped.
template <class Lanes>
int64_t bn_row_sums(const BnRow& r, int64_t j, int64_t end, bool need_gxhat, float& a, float& b) {
    a = 0.f, b = 0.f;
    if (j % Lanes::width != 0) return j;
    typename Lanes::V va = Lanes::zero(), vb = Lanes::zero();
    for (; j + Lanes::width <= end; j += Lanes::width) {
        const typename Lanes::V v = Lanes::gm(r.g, r.mask, j);
        va = Lanes::add(va, v);
        if (need_gxhat) vb = Lanes::fmadd(v, bn_xhat<Lanes>(r, j), vb);
    }
    a = Lanes::reduce(va), b = Lanes::reduce(vb);
    return j;
}

// gx = k (gm - mean_g - x_hat mean_gxhat) over the whole lanes of [j, end); returns where it stopped.
template <class Lanes>
int64_t bn_row_input_grad(const BnRow& r, int64_t j, int64_t end, float k, float mean_g, float mean_gxhat,
                          float* gx) {
    if (j % Lanes::width != 0) return j;
    const typename Lanes::V vk = Lanes::set1(k), vmg = Lanes::set1(mean_g), vmgx = Lanes::set1(mean_gxhat);
    for (; j + Lanes::width <= end; j += Lanes::width) {
        const typename Lanes::V t =
            Lanes::sub(Lanes::sub(Lanes::gm(r.g, r.mask, j), vmg), Lanes::mul(bn_xhat<Lanes>(r, j), vmgx));
        Lanes::store(gx + j, Lanes::mul(vk, t));
    }
    return j;
}

}  // namespace razor::detail
