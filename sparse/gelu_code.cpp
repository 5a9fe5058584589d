// sparse/gelu_code.cpp -- see gelu_code.h.
#include "sparse/gelu_code.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/check.h"

namespace razor::sparse {
namespace {

constexpr int kLevels = 16;
constexpr int kCells = 8192;             // coding table over [-kRange, kRange)
constexpr float kRange = 8.f;
constexpr float kCellsPerUnit = kCells / (2 * kRange);
constexpr int64_t kChunk = 1 << 15;      // bytes per parallel chunk

double derivative(double x) {   // d(x) = Phi(x) + x phi(x), in double
    return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

struct Tables {
    double d_min, d_max;
    std::array<float, kLevels> level, representative;
    std::array<uint8_t, kCells> code;
    std::array<int32_t, kCells> code32;   // the same, for 16-lane gathers
    uint8_t below, above;   // codes outside [-kRange, kRange)

    int nearest(double d) const {
        const double step = (d_max - d_min) / (kLevels - 1);
        return static_cast<int>(std::clamp(std::lround((d - d_min) / step), 0L, static_cast<long>(kLevels - 1)));
    }
    Tables() {
        const double r2 = std::sqrt(2.0);
        d_min = derivative(-r2), d_max = derivative(r2);   // d' = phi(x)(2 - x^2): extrema at -+sqrt 2
        for (int j = 0; j < kLevels; ++j) {
            const double L = d_min + j * (d_max - d_min) / (kLevels - 1);
            double lo = -r2, hi = r2;   // d is increasing on [-sqrt 2, sqrt 2]: bisect d(x) = L
            for (int it = 0; it < 80; ++it) {
                const double mid = 0.5 * (lo + hi);
                (derivative(mid) < L ? lo : hi) = mid;
            }
            level[j] = static_cast<float>(L);
            representative[j] = static_cast<float>(0.5 * (lo + hi));
        }
        for (int c = 0; c < kCells; ++c) {
            code[c] = static_cast<uint8_t>(nearest(derivative(-kRange + (c + 0.5) / kCellsPerUnit)));
            code32[c] = code[c];
        }
        below = static_cast<uint8_t>(nearest(0.0));
        above = static_cast<uint8_t>(nearest(1.0));
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

inline uint8_t code_at(const Tables& t, float v) {
    const float u = (v + kRange) * kCellsPerUnit;
    if (u >= static_cast<float>(kCells)) return t.above;
    if (!(u >= 0.f)) return v < 0.f ? t.below : t.code[0];   // v < -kRange, or NaN
    return t.code[static_cast<int>(u)];
}

#if defined(__AVX512F__)
// code_at for 16 values at once, packed two per byte (low nibble first) into out[0..7]: the same cell, the same
// codes above, below and for NaN (u = NaN takes cell 0, as code_at does).
inline void codes16(const Tables& t, const float* v, uint8_t* out) {
    const __m512 x = _mm512_loadu_ps(v);
    const __m512 u = _mm512_mul_ps(_mm512_add_ps(x, _mm512_set1_ps(kRange)), _mm512_set1_ps(kCellsPerUnit));
    const __mmask16 above = _mm512_cmp_ps_mask(u, _mm512_set1_ps(static_cast<float>(kCells)), _CMP_GE_OQ);
    const __mmask16 below = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_NGE_UQ) &
                            _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    // max(u, 0) is 0 for a NaN u (the second operand); min(.., kCells - 1) keeps +inf in the table
    const __m512 cell = _mm512_min_ps(_mm512_max_ps(u, _mm512_setzero_ps()), _mm512_set1_ps(kCells - 1.f));
    __m512i codes = _mm512_i32gather_epi32(_mm512_cvttps_epi32(cell), t.code32.data(), 4);
    codes = _mm512_mask_mov_epi32(codes, above, _mm512_set1_epi32(t.above));
    codes = _mm512_mask_mov_epi32(codes, below, _mm512_set1_epi32(t.below));
    // 64-bit lane k holds codes 2k (low half) and 2k + 1 (high half): one byte lo | hi << 4 each
    const __m512i pairs = _mm512_or_si512(_mm512_and_si512(codes, _mm512_set1_epi64(0xFFFFFFFF)),
                                          _mm512_slli_epi64(_mm512_srli_epi64(codes, 32), 4));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi8(pairs));
}
#endif

}  // namespace

float GeluDerivativeCode::level(int code) { return tables().level.at(static_cast<size_t>(code)); }
float GeluDerivativeCode::representative(int code) { return tables().representative.at(static_cast<size_t>(code)); }
int GeluDerivativeCode::code_of(float x) { return code_at(tables(), x); }

std::unique_ptr<GeluDerivativeCode> GeluDerivativeCode::pack(const Tensor& x_in) {
    if (x_in.dtype() != DType::F32)
        throw Error(fmt("GeluDerivativeCode::pack: expected an f32 tensor, got ", dtype_name(x_in.dtype()),
                        "; hint: only GELU's f32 input is coded"));
    const Tensor x = x_in.contiguous();
    const int64_t n = x.numel(), bytes = (n + 1) / 2;
    auto storage = std::make_shared<Storage>(static_cast<size_t>(bytes));
    uint8_t* out = static_cast<uint8_t*>(storage->data);
    const float* px = x.f32();
    const Tables& t = tables();
    const int64_t chunks = (bytes + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t k = 0; k < chunks; ++k) {
        const int64_t begin = k * kChunk, end = std::min(bytes, begin + kChunk);
        int64_t i = begin;
#if defined(__AVX512F__)
        for (; i + 8 <= end && 2 * i + 16 <= n; i += 8) codes16(t, px + 2 * i, out + i);
#endif
        for (; i < end; ++i) {
            const uint8_t lo = code_at(t, px[2 * i]);
            const uint8_t hi = 2 * i + 1 < n ? code_at(t, px[2 * i + 1]) : 0;
            out[i] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
    return std::unique_ptr<GeluDerivativeCode>(new GeluDerivativeCode(x.shape(), std::move(storage)));
}

Tensor GeluDerivativeCode::unpack() const {
    Tensor out = Tensor::empty(shape());
    const int64_t n = out.numel(), bytes = (n + 1) / 2;
    float* dst = out.f32();
    const uint8_t* src = codes();
    const auto& rep = tables().representative;
    const int64_t chunks = (bytes + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t k = 0; k < chunks; ++k) {
        const int64_t begin = k * kChunk, end = std::min(bytes, begin + kChunk);
        for (int64_t i = begin; i < end; ++i) {
            dst[2 * i] = rep[src[i] & 15];
            if (2 * i + 1 < n) dst[2 * i + 1] = rep[src[i] >> 4];
        }
    }
    return out;
}

bool GeluDerivativeCode::multiply_by_codebook(float (*f)(float), const float* g, float* out) const {
    alignas(64) float value[kLevels];   // f at each code's representative
    for (int j = 0; j < kLevels; ++j) value[j] = f(tables().representative[static_cast<size_t>(j)]);
    const int64_t n = shape_numel(shape()), bytes = (n + 1) / 2;
    const uint8_t* src = codes();
    const int64_t chunks = (bytes + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t k = 0; k < chunks; ++k) {
        const int64_t begin = k * kChunk, end = std::min(bytes, begin + kChunk);
        int64_t i = begin;
#if defined(__AVX512F__)
        // 8 bytes = 16 codes per step: nibbles interleaved low, high (element 2i, 2i + 1), widened to 16 indices
        // into the 16-float table held in one register.
        const __m512 table = _mm512_load_ps(value);
        const __m128i low4 = _mm_set1_epi8(0x0F);
        for (; i + 8 <= end && 2 * (i + 8) <= n; i += 8) {
            uint64_t word;
            std::memcpy(&word, src + i, 8);
            const __m128i b = _mm_cvtsi64_si128(static_cast<long long>(word));
            const __m128i codes16 = _mm_unpacklo_epi8(_mm_and_si128(b, low4), _mm_and_si128(_mm_srli_epi16(b, 4), low4));
            const __m512 d = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(codes16), table);
            _mm512_storeu_ps(out + 2 * i, _mm512_mul_ps(_mm512_loadu_ps(g + 2 * i), d));
        }
#endif
        for (; i < end; ++i) {
            out[2 * i] = g[2 * i] * value[src[i] & 15];
            if (2 * i + 1 < n) out[2 * i + 1] = g[2 * i + 1] * value[src[i] >> 4];
        }
    }
    return true;
}

}  // namespace razor::sparse
