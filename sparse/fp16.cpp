// sparse/fp16.cpp -- bulk fp32 <-> fp16 conversions (see fp16.h).
#include "sparse/fp16.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace razor::sparse {

bool f16c_enabled() {
#if defined(__F16C__)
    return true;
#else
    return false;
#endif
}

void floats_to_halves(const float* src, uint16_t* dst, int64_t n, bool portable) {
    int64_t i = 0;
#if defined(__F16C__)
    if (!portable) {
        for (; i + 8 <= n; i += 8) {
            const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
        }
    }
#endif
    for (; i < n; ++i) dst[i] = float_to_half_bits(src[i]);
}

void halves_to_floats(const uint16_t* src, float* dst, int64_t n, bool portable) {
    int64_t i = 0;
#if defined(__F16C__)
    if (!portable) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
#endif
    for (; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}

}  // namespace razor::sparse
