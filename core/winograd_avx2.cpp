// core/winograd_avx2.cpp -- the AVX2 family of the F(2x2, 3x3) kernels (see winograd.h for the algebra,
// winograd_kernels.h for the blocking). Compiled with -mavx2 -mfma (CMakeLists.txt); winograd.cpp calls it only
// where cpu_isa() has avx2.
//
// The transforms run 8 tiles (one ymm) at a time along a tile row, as the AVX-512 ones run 16. Unlike them, every
// map goes by bands of whole tile rows: a band is nb images x tile rows i0 .. i1, its tiles side by side as the
// columns t = k * rows * tw + (i - i0) * tw + j of V (C, T) and M (OC, T). Maps of at most 16 tiles take all their
// rows and winograd_images_per_call images in one band (one set of 16 GEMMs, as the AVX-512 gathers do); larger
// maps one image and winograd_band_rows tile rows. AVX2 has neither masked loads with zeroing of this kind nor
// scatters, so a channel's band rows are first copied into a zero-padded strip (the padding, never stored in x),
// and tile blocks shorter than 8 tiles store with masks.
#include "core/winograd_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <cstring>

#include "core/gemm.h"

namespace razor::detail {
namespace {

// Lanes 0 .. n-1 of a mask (n in 0..8).
inline __m256i lanes(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The n first floats of v to p (n in 0..8).
inline void store_n(float* p, __m256 v, int64_t n) {
    if (n == 8) _mm256_storeu_ps(p, v);
    else if (n > 0) _mm256_maskstore_ps(p, lanes(n), v);
}

// Elements 0, 2, .., 14 (even) and 1, 3, .., 15 (odd) of the 16 floats lo:hi.
inline __m256 evens(__m256 lo, __m256 hi) {
    const __m256 s = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));   // lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
}
inline __m256 odds(__m256 lo, __m256 hi) {
    const __m256 s = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
}

// One tile row's input transform, tiles [0, tw): v[xi * vs + j] = (B^T d B)[xi] of tile j, whose 4x4 input d is
// padded columns 2j .. 2j + 3 of the 4 padded rows r[a] (padded column p = image column p - 1).
void input_row(const float* const r[4], int64_t tw, float* v, int64_t vs) {
    for (int64_t j0 = 0; j0 < tw; j0 += 8) {
        const int64_t n = std::min<int64_t>(8, tw - j0);
        __m256 t[4][4];
        for (int a = 0; a < 4; ++a) {
            const float* p = r[a] + 2 * j0;   // d0 of tile j0 + l is p[2l], d1 p[2l + 1], d2 p[2l + 2], d3 p[2l + 3]
            const __m256 p0 = _mm256_loadu_ps(p), p1 = _mm256_loadu_ps(p + 8);
            const __m256 q0 = _mm256_loadu_ps(p + 2), q1 = _mm256_loadu_ps(p + 10);
            const __m256 d0 = evens(p0, p1), d1 = odds(p0, p1), d2 = evens(q0, q1), d3 = odds(q0, q1);
            t[a][0] = _mm256_sub_ps(d0, d2);
            t[a][1] = _mm256_add_ps(d1, d2);
            t[a][2] = _mm256_sub_ps(d2, d1);
            t[a][3] = _mm256_sub_ps(d1, d3);
        }
        for (int q = 0; q < 4; ++q) {
            store_n(v + q * vs + j0, _mm256_sub_ps(t[0][q], t[2][q]), n);
            store_n(v + (4 + q) * vs + j0, _mm256_add_ps(t[1][q], t[2][q]), n);
            store_n(v + (8 + q) * vs + j0, _mm256_sub_ps(t[2][q], t[1][q]), n);
            store_n(v + (12 + q) * vs + j0, _mm256_sub_ps(t[1][q], t[3][q]), n);
        }
    }
}

// V (16, C, T) of one band: nb images x (C, H, W) planes, tile rows i0 .. i1; strip: (2 (i1 - i0) + 2, Wp) scratch.
void input_band(const float* x, int64_t C, int64_t H, int64_t W, int64_t nb, int64_t i0, int64_t i1, float* V,
                int64_t vs, int64_t T, float* strip) {
    const int64_t tw = W / 2, rows = i1 - i0, Wp = winograd_strip_width(W);
    for (int64_t k = 0; k < nb; ++k)
        for (int64_t c = 0; c < C; ++c) {
            const float* plane = x + (k * C + c) * H * W;
            for (int64_t s = 0; s < 2 * rows + 2; ++s) {   // strip row s = image row 2 i0 - 1 + s, zero outside
                float* d = strip + s * Wp;
                const int64_t row = 2 * i0 - 1 + s;
                std::fill(d, d + Wp, 0.f);
                if (row >= 0 && row < H) std::memcpy(d + 1, plane + row * W, sizeof(float) * W);
            }
            for (int64_t i = i0; i < i1; ++i) {
                const float* r[4];
                for (int a = 0; a < 4; ++a) r[a] = strip + (2 * (i - i0) + a) * Wp;
                input_row(r, tw, V + c * T + k * rows * tw + (i - i0) * tw, vs);
            }
        }
}

// One tile row's output transform, tiles [0, tw): output rows y0, y1 at columns 2j, 2j + 1 = (A^T m A) of tile j,
// m[xi] = m[xi * ms + j], plus b. Reads up to 7 floats past a row of M (inside the skew or the next row).
void output_row(const float* m, int64_t ms, int64_t tw, float b, float* y0, float* y1) {
    const __m256 bias = _mm256_set1_ps(b);
    for (int64_t j0 = 0; j0 < tw; j0 += 8) {
        const int64_t n = std::min<int64_t>(8, tw - j0);
        __m256 s[4][2];
        for (int p = 0; p < 4; ++p) {
            const float* mp = m + 4 * p * ms + j0;
            const __m256 m0 = _mm256_loadu_ps(mp), m1 = _mm256_loadu_ps(mp + ms);
            const __m256 m2 = _mm256_loadu_ps(mp + 2 * ms), m3 = _mm256_loadu_ps(mp + 3 * ms);
            s[p][0] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
            s[p][1] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
        }
        __m256 y[2][2];   // y[r][c]: output row r, column 2j + c
        for (int c = 0; c < 2; ++c) {
            y[0][c] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[0][c], s[1][c]), s[2][c]), bias);
            y[1][c] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s[1][c], s[2][c]), s[3][c]), bias);
        }
        float* out[2] = {y0 + 2 * j0, y1 + 2 * j0};
        for (int r = 0; r < 2; ++r) {   // interleave columns 2j and 2j + 1: tiles 0-3, then 4-7
            const __m256 lo = _mm256_unpacklo_ps(y[r][0], y[r][1]), hi = _mm256_unpackhi_ps(y[r][0], y[r][1]);
            store_n(out[r], _mm256_permute2f128_ps(lo, hi, 0x20), std::min<int64_t>(8, 2 * n));
            store_n(out[r] + 8, _mm256_permute2f128_ps(lo, hi, 0x31), std::max<int64_t>(0, 2 * n - 8));
        }
    }
}

// Y (nb, OC, H, W) of one band from M (16, OC, T), plus the bias.
void output_band(const float* M, int64_t ms, int64_t OC, int64_t H, int64_t W, int64_t nb, int64_t i0, int64_t i1,
                 const float* bias, float* y, int64_t T) {
    const int64_t tw = W / 2, rows = i1 - i0;
    for (int64_t k = 0; k < nb; ++k)
        for (int64_t oc = 0; oc < OC; ++oc)
            for (int64_t i = i0; i < i1; ++i) {
                float* y0 = y + ((k * OC + oc) * H + 2 * i) * W;
                output_row(M + oc * T + k * rows * tw + (i - i0) * tw, ms, tw, bias ? bias[oc] : 0.f, y0, y0 + W);
            }
}

// The weight gradient's transform of one tile row of gy (rows y0, y1), tiles [0, tw), into out[xi * ms + j]: the
// adjoint of the output transform, (A q A^T)[xi] for each 2x2 tile q, with A = [[1, 0], [1, 1], [1, -1], [0, -1]].
void gy_row(const float* y0, const float* y1, int64_t tw, float* out, int64_t ms) {
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < tw; j0 += 8) {
        const int64_t n = std::min<int64_t>(8, tw - j0);
        const __m256i m_lo = lanes(std::min<int64_t>(8, 2 * n)), m_hi = lanes(std::max<int64_t>(0, 2 * n - 8));
        __m256 w[2][4];
        const float* rows[2] = {y0 + 2 * j0, y1 + 2 * j0};
        for (int r = 0; r < 2; ++r) {
            const __m256 l = _mm256_maskload_ps(rows[r], m_lo), h = _mm256_maskload_ps(rows[r] + 8, m_hi);
            const __m256 q0 = evens(l, h), q1 = odds(l, h);   // columns 2j and 2j + 1
            w[r][0] = q0;
            w[r][1] = _mm256_add_ps(q0, q1);
            w[r][2] = _mm256_sub_ps(q0, q1);
            w[r][3] = _mm256_sub_ps(zero, q1);
        }
        for (int k = 0; k < 4; ++k) {
            store_n(out + k * ms + j0, w[0][k], n);
            store_n(out + (4 + k) * ms + j0, _mm256_add_ps(w[0][k], w[1][k]), n);
            store_n(out + (8 + k) * ms + j0, _mm256_sub_ps(w[0][k], w[1][k]), n);
            store_n(out + (12 + k) * ms + j0, _mm256_sub_ps(zero, w[1][k]), n);
        }
    }
}

// G (16, OC, T) of one band from gy (nb, OC, H, W).
void gy_band(const float* gy, int64_t OC, int64_t H, int64_t W, int64_t nb, int64_t i0, int64_t i1, float* G,
             int64_t ms, int64_t T) {
    const int64_t tw = W / 2, rows = i1 - i0;
    for (int64_t k = 0; k < nb; ++k)
        for (int64_t oc = 0; oc < OC; ++oc)
            for (int64_t i = i0; i < i1; ++i) {
                const float* y0 = gy + ((k * OC + oc) * H + 2 * i) * W;
                gy_row(y0, y0 + W, tw, G + oc * T + k * rows * tw + (i - i0) * tw, ms);
            }
}

// The bands of a call: all tile rows of nb images (small maps), or each image by winograd_band_rows rows.
template <class Band>
void for_each_band(int64_t C, int64_t OC, int64_t H, int64_t W, int64_t nb, Band band) {
    const int64_t th = H / 2, tw = W / 2;
    if (winograd_small_map(H, W)) return band(int64_t{0}, nb, int64_t{0}, th);
    const int64_t rows = winograd_band_rows(C, OC, th, tw);
    for (int64_t k = 0; k < nb; ++k)
        for (int64_t i0 = 0; i0 < th; i0 += rows) band(k, int64_t{1}, i0, std::min(th, i0 + rows));
}

}  // namespace

void winograd_conv3x3_avx2(const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W, int64_t nb,
                           const float* bias, float* y, float* scratch) {
    const int64_t tw = W / 2;
    for_each_band(C, OC, H, W, nb, [&](int64_t k, int64_t images, int64_t i0, int64_t i1) {
        const int64_t T = images * (i1 - i0) * tw;   // tiles in this band
        // The 16 matrices of V (and of M) are a cache line further apart than their size (winograd_avx512.cpp).
        const int64_t vs = C * T + kWinogradSkew, ms = OC * T + kWinogradSkew;
        float* V = scratch;              // (16, C, T)
        float* M = V + 16 * vs;          // (16, OC, T)
        float* strip = M + 16 * ms;      // (2 rows + 2, Wp)
        input_band(x + k * C * H * W, C, H, W, images, i0, i1, V, vs, T, strip);
        // M[xi] (OC, T) = U[xi] (OC, C) . V[xi] (C, T)
        for (int xi = 0; xi < 16; ++xi)
            gemm(false, false, OC, T, C, 1.f, u + xi * OC * C, C, V + xi * vs, T, 0.f, M + xi * ms, T);
        output_band(M, ms, OC, H, W, images, i0, i1, bias, y + k * OC * H * W, T);
    });
}

void winograd_filter_grad_avx2(int64_t OC, int64_t C, const float* x, const float* gy, int64_t H, int64_t W,
                               int64_t nb, bool accumulate, float* du, float* scratch) {
    const int64_t tw = W / 2;
    for_each_band(C, OC, H, W, nb, [&](int64_t k, int64_t images, int64_t i0, int64_t i1) {
        const int64_t T = images * (i1 - i0) * tw;
        const int64_t vs = C * T + kWinogradSkew, ms = OC * T + kWinogradSkew;
        float* V = scratch;              // (16, C, T)
        float* G = V + 16 * vs;          // (16, OC, T)
        float* strip = G + 16 * ms;
        input_band(x + k * C * H * W, C, H, W, images, i0, i1, V, vs, T, strip);
        gy_band(gy + k * OC * H * W, OC, H, W, images, i0, i1, G, ms, T);
        // du[xi] (OC, C) (+)= Gy[xi] (OC, T) . V[xi]^T (T, C)
        for (int xi = 0; xi < 16; ++xi)
            gemm(false, true, OC, C, T, 1.f, G + xi * ms, T, V + xi * vs, T, accumulate ? 1.f : 0.f, du + xi * OC * C,
                 C);
        accumulate = true;
    });
}

}  // namespace razor::detail

#endif  // __AVX2__ && __FMA__
