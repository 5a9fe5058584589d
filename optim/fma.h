// optim/fma.h -- a * b + c rounded once where the CPU fuses it, as PyTorch's AVX2 kernels do.
//
// reference: ATen's vectorized add(alpha) / addcmul (vec::fmadd). razor builds with -std=c++20 (no implicit
// contraction), so the optimizers say explicitly where PyTorch fuses; on machines without FMA this is a * b + c.
// aarch64 always has a fused multiply-add (ACLE's __ARM_FEATURE_FMA), and ATen's NEON kernels fuse there too.
#pragma once

#include <cmath>

namespace razor::optim {

inline float madd(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    return std::fma(a, b, c);
#else
    return a * b + c;
#endif
}

}  // namespace razor::optim
