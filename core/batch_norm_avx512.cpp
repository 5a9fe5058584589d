// core/batch_norm_avx512.cpp -- BatchNorm backward's row kernels at 16 lanes (batch_norm_kernels.h). Compiled with
// the AVX-512 flags (CMakeLists.txt "kernel families").
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports a false "may be used uninitialized" inside _mm512_reduce_add_ps (avx512fintrin.h), not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "core/batch_norm_rows.h"

namespace razor::detail {

namespace {

struct Lanes {
    using V = __m512;
    static constexpr int64_t width = 16;
    static V zero() { return _mm512_setzero_ps(); }
    static V set1(float v) { return _mm512_set1_ps(v); }
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static float reduce(V v) { return _mm512_reduce_add_ps(v); }
    static V widen(const uint8_t* codes) {   // 16 codes as floats
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes))));
    }
    // gm for values j..j+15: the 16 mask bits are the load's lane mask.
    static V gm(const float* g, const uint64_t* mask, int64_t j) {
        const auto bits = mask ? static_cast<__mmask16>(mask[j >> 6] >> (j & 63)) : static_cast<__mmask16>(0xFFFF);
        return _mm512_maskz_loadu_ps(bits, g + j);
    }
};

}  // namespace

BnRowKernels bn_row_kernels_avx512() { return {&bn_row_sums<Lanes>, &bn_row_input_grad<Lanes>}; }

}  // namespace razor::detail
