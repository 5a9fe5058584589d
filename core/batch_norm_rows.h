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

// x_hat of values j.. of one channel, Lanes::width at a time, from the two stored forms: (x - centre) * scale from
// fp32 x, or off + mul * code from per-channel 8-bit codes. Each loop below is instantiated once per form, so the
// choice is made once per run, not per register.
template <class Lanes>
struct XhatF32Lanes {
    const float* x;
    typename Lanes::V centre, scale;
    typename Lanes::V operator()(int64_t j) const { return Lanes::mul(Lanes::sub(Lanes::load(x + j), centre), scale); }
};
template <class Lanes>
struct XhatCodeLanes {
    const uint8_t* codes;
    typename Lanes::V off, mul;
    typename Lanes::V operator()(int64_t j) const { return Lanes::fmadd(Lanes::widen(codes + j), mul, off); }
};

// Calls body(xhat) with the run's x_hat reader.
template <class Lanes, class Body>
int64_t with_xhat_lanes(const BnRow& r, const Body& body) {
    if (r.codes) return body(XhatCodeLanes<Lanes>{r.codes, Lanes::set1(r.xa), Lanes::set1(r.xb)});
    return body(XhatF32Lanes<Lanes>{r.x, Lanes::set1(r.xa), Lanes::set1(r.xb)});
}

// a = Σ gm, b = Σ gm x_hat (b only when need_gxhat) over the whole lanes of [j, end); returns where it stopped.
template <class Lanes>
int64_t bn_row_sums(const BnRow& r, int64_t j, int64_t end, bool need_gxhat, float& a, float& b) {
    a = 0.f, b = 0.f;
    if (j % Lanes::width != 0) return j;
    return with_xhat_lanes<Lanes>(r, [&](const auto& xhat) {
        typename Lanes::V va = Lanes::zero(), vb = Lanes::zero();
        int64_t i = j;
        for (; i + Lanes::width <= end; i += Lanes::width) {
            const typename Lanes::V v = Lanes::gm(r.g, r.mask, i);
            va = Lanes::add(va, v);
            if (need_gxhat) vb = Lanes::fmadd(v, xhat(i), vb);
        }
        a = Lanes::reduce(va), b = Lanes::reduce(vb);
        return i;
    });
}

// gx = k (gm - mean_g - x_hat mean_gxhat) over the whole lanes of [j, end); returns where it stopped.
template <class Lanes>
int64_t bn_row_input_grad(const BnRow& r, int64_t j, int64_t end, float k, float mean_g, float mean_gxhat,
                          float* gx) {
    if (j % Lanes::width != 0) return j;
    const typename Lanes::V vk = Lanes::set1(k), vmg = Lanes::set1(mean_g), vmgx = Lanes::set1(mean_gxhat);
    return with_xhat_lanes<Lanes>(r, [&](const auto& xhat) {
        int64_t i = j;
        for (; i + Lanes::width <= end; i += Lanes::width) {
            const typename Lanes::V t =
                Lanes::sub(Lanes::sub(Lanes::gm(r.g, r.mask, i), vmg), Lanes::mul(xhat(i), vmgx));
            Lanes::store(gx + i, Lanes::mul(vk, t));
        }
        return i;
    });
}

}  // namespace razor::detail
