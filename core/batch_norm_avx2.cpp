// core/batch_norm_avx2.cpp -- BatchNorm backward's row kernels at 8 lanes of AVX2+FMA (batch_norm_kernels.h).
// Compiled with the AVX2 flags (CMakeLists.txt "kernel families").
#include <immintrin.h>

#include "core/batch_norm_rows.h"

namespace razor::detail {

namespace {

struct Lanes {
    using V = __m256;
    static constexpr int64_t width = 8;
    static V zero() { return _mm256_setzero_ps(); }
    static V set1(float v) { return _mm256_set1_ps(v); }
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static float reduce(V v) {
        const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
        return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
    }
    static V widen(const uint8_t* codes) {   // 8 codes as floats
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes))));
    }
    // gm for values j..j+7. No mask registers: the 8 mask bits become lane masks by testing each lane's own bit.
    static V gm(const float* g, const uint64_t* mask, int64_t j) {
        const __m256 v = _mm256_loadu_ps(g + j);
        if (!mask) return v;
        const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        const __m256i byte = _mm256_set1_epi32(static_cast<int>((mask[j >> 6] >> (j & 63)) & 0xFFu));
        return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(byte, bit), bit)));
    }
};

}  // namespace

BnRowKernels bn_row_kernels_avx2() { return {&bn_row_sums<Lanes>, &bn_row_input_grad<Lanes>}; }

}  // namespace razor::detail
