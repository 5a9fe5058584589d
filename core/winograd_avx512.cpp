// core/winograd_avx512.cpp -- the AVX-512 family of the F(2x2, 3x3) kernels (see winograd.h for the algebra,
// winograd_kernels.h for the blocking). Compiled with AVX-512 target flags (CMakeLists.txt); winograd.cpp calls it
// only where cpu_isa() has avx512.
#include "core/winograd_kernels.h"

#if defined(__AVX512F__)

#include <immintrin.h>

#include <algorithm>

#include "core/gemm.h"

namespace razor::detail {
namespace {

// One tile row's input transform, tiles [0, tw): v[xi * vs + j] = (B^T d B)[xi] of tile j, whose 4x4 input d is
// columns 2j - 1 .. 2j + 2 of the 4 image rows r_a (a = 0..3: rows 2i - 1 .. 2i + 2; null above or below the image),
// zero outside the image: the padding is never stored.
void input_tiles(const float* const r[4], int64_t tw, float* v, int64_t vs) {
    // 16 tiles at a time: a row's d0..d3 of tiles j0..j0+15 are the even and odd floats of the padded row from column
    // 2 j0 (d0, d1) and from 2 j0 + 2 (d2, d3), deinterleaved by one two-source permute each. Padded column k is
    // image column k - 1: the loads start one float early, with padded column 0 (j0 = 0) and W + 1 (the last
    // block) masked off, so they read nothing outside the row.
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int64_t j0 = 0; j0 < tw; j0 += 16) {
        const int64_t n = std::min<int64_t>(16, tw - j0);
        const auto all = static_cast<uint32_t>((uint64_t{1} << (2 * n)) - 1);   // 2n floats per pair of loads
        const uint32_t m0 = all & ~(j0 == 0 ? 1u : 0u);                           // not padded column 0
        const uint32_t m2 = all & ~(j0 + n == tw ? 1u << (2 * n - 1) : 0u);       // not padded column W + 1
        __m512 t[4][4];
        for (int a = 0; a < 4; ++a) {
            __m512 d0 = _mm512_setzero_ps(), d1 = d0, d2 = d0, d3 = d0;
            if (r[a]) {
                const float* x = r[a] - 1 + 2 * j0;   // padded column 2 j0
                const __m512 l0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m0), x);
                const __m512 h0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m0 >> 16), x + 16);
                const __m512 l2 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m2), x + 2);
                const __m512 h2 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m2 >> 16), x + 18);
                d0 = _mm512_permutex2var_ps(l0, even, h0), d1 = _mm512_permutex2var_ps(l0, odd, h0);
                d2 = _mm512_permutex2var_ps(l2, even, h2), d3 = _mm512_permutex2var_ps(l2, odd, h2);
            }
            t[a][0] = _mm512_sub_ps(d0, d2);
            t[a][1] = _mm512_add_ps(d1, d2);
            t[a][2] = _mm512_sub_ps(d2, d1);
            t[a][3] = _mm512_sub_ps(d1, d3);
        }
        const __mmask16 out = static_cast<__mmask16>((1u << n) - 1);
        for (int q = 0; q < 4; ++q) {
            _mm512_mask_storeu_ps(v + q * vs + j0, out, _mm512_sub_ps(t[0][q], t[2][q]));
            _mm512_mask_storeu_ps(v + (4 + q) * vs + j0, out, _mm512_add_ps(t[1][q], t[2][q]));
            _mm512_mask_storeu_ps(v + (8 + q) * vs + j0, out, _mm512_sub_ps(t[2][q], t[1][q]));
            _mm512_mask_storeu_ps(v + (12 + q) * vs + j0, out, _mm512_sub_ps(t[1][q], t[3][q]));
        }
    }
}

// The 4 image rows of tile row i of a channel plane x (H, W): rows 2i - 1 .. 2i + 2, null outside the image.
inline void tile_rows_of(const float* x, int64_t H, int64_t W, int64_t i, const float* r[4]) {
    for (int a = 0; a < 4; ++a) {
        const int64_t row = 2 * i - 1 + a;
        r[a] = row >= 0 && row < H ? x + row * W : nullptr;
    }
}

// One tile row's output transform, tiles [0, tw): output rows y0, y1 at columns 2j, 2j+1 = (A^T m A) of tile j,
// m[xi] = m[xi * ms + j], plus b.
void output_tiles(const float* m, int64_t ms, int64_t tw, float b, float* y0, float* y1) {
    // 16 tiles at a time; the two output columns of each tile are interleaved by two-source permutes.
    const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i second = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512 bias = _mm512_set1_ps(b);
    for (int64_t j0 = 0; j0 < tw; j0 += 16) {
        const int64_t n = std::min<int64_t>(16, tw - j0);
        const __mmask16 in = static_cast<__mmask16>((1u << n) - 1);
        __m512 s[4][2];
        for (int p = 0; p < 4; ++p) {
            const float* mp = m + 4 * p * ms + j0;
            const __m512 m0 = _mm512_maskz_loadu_ps(in, mp), m1 = _mm512_maskz_loadu_ps(in, mp + ms);
            const __m512 m2 = _mm512_maskz_loadu_ps(in, mp + 2 * ms), m3 = _mm512_maskz_loadu_ps(in, mp + 3 * ms);
            s[p][0] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
            s[p][1] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
        }
        const __m512 y00 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0][0], s[1][0]), s[2][0]), bias);
        const __m512 y01 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0][1], s[1][1]), s[2][1]), bias);
        const __m512 y10 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[1][0], s[2][0]), s[3][0]), bias);
        const __m512 y11 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[1][1], s[2][1]), s[3][1]), bias);
        const int64_t floats = 2 * n;
        const __mmask16 lo = floats >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << floats) - 1);
        const __mmask16 hi = floats > 16 ? static_cast<__mmask16>((1u << (floats - 16)) - 1) : 0;
        float* out0 = y0 + 2 * j0;
        float* out1 = y1 + 2 * j0;
        _mm512_mask_storeu_ps(out0, lo, _mm512_permutex2var_ps(y00, first, y01));
        _mm512_mask_storeu_ps(out0 + 16, hi, _mm512_permutex2var_ps(y00, second, y01));
        _mm512_mask_storeu_ps(out1, lo, _mm512_permutex2var_ps(y10, first, y11));
        _mm512_mask_storeu_ps(out1 + 16, hi, _mm512_permutex2var_ps(y10, second, y11));
    }
}

// Small maps: the tiles of one image in one vector (lane t = i tw + j, `lanes` of them). gather[a * 4 + b] holds the
// plane offsets (2i - 1 + a) W + 2j - 1 + b of input d[a][b], inside[a * 4 + b] the lanes where that lies inside the
// image (the others are the zero padding, never read); v is the image's first column of V.
void input_tiles_gathered(const float* plane, const __m512i gather[16], const __mmask16 inside[16], __mmask16 lanes,
                          float* v, int64_t vs) {
    __m512 t[4][4];
    for (int a = 0; a < 4; ++a) {
        __m512 d[4];
        for (int b = 0; b < 4; ++b)
            d[b] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), inside[a * 4 + b], gather[a * 4 + b], plane, 4);
        t[a][0] = _mm512_sub_ps(d[0], d[2]);
        t[a][1] = _mm512_add_ps(d[1], d[2]);
        t[a][2] = _mm512_sub_ps(d[2], d[1]);
        t[a][3] = _mm512_sub_ps(d[1], d[3]);
    }
    for (int q = 0; q < 4; ++q) {
        _mm512_mask_storeu_ps(v + q * vs, lanes, _mm512_sub_ps(t[0][q], t[2][q]));
        _mm512_mask_storeu_ps(v + (4 + q) * vs, lanes, _mm512_add_ps(t[1][q], t[2][q]));
        _mm512_mask_storeu_ps(v + (8 + q) * vs, lanes, _mm512_sub_ps(t[2][q], t[1][q]));
        _mm512_mask_storeu_ps(v + (12 + q) * vs, lanes, _mm512_sub_ps(t[1][q], t[3][q]));
    }
}

// Small maps: one image's output plane y (H, W) of one channel from its tiles' m[xi * ms + t]; scatter[r * 2 + s]
// holds the plane offsets (2i + r) W + 2j + s of output (r, s) of tile t.
void output_tiles_scattered(const float* m, int64_t ms, const __m512i scatter[4], __mmask16 lanes, float b, float* y) {
    __m512 s[4][2];
    for (int p = 0; p < 4; ++p) {
        const float* mp = m + 4 * p * ms;
        const __m512 m0 = _mm512_maskz_loadu_ps(lanes, mp), m1 = _mm512_maskz_loadu_ps(lanes, mp + ms);
        const __m512 m2 = _mm512_maskz_loadu_ps(lanes, mp + 2 * ms), m3 = _mm512_maskz_loadu_ps(lanes, mp + 3 * ms);
        s[p][0] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
        s[p][1] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
    }
    const __m512 bias = _mm512_set1_ps(b);
    for (int c = 0; c < 2; ++c) {
        _mm512_mask_i32scatter_ps(y, lanes, scatter[c],
                                  _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0][c], s[1][c]), s[2][c]), bias), 4);
        _mm512_mask_i32scatter_ps(y, lanes, scatter[2 + c],
                                  _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[1][c], s[2][c]), s[3][c]), bias), 4);
    }
}

// The weight gradient's transform of gy, the adjoint of the output transform: for a 2x2 tile q of gy,
// (A q A^T)[xi] with A = (A^T)^T = [[1, 0], [1, 1], [1, -1], [0, -1]]: the column combinations of each of q's two
// rows (w_r = q_r0, q_r0 + q_r1, q_r0 - q_r1, -q_r1), then the same of the rows. Stores 16 vectors, masked to lanes.
inline void store_gy_tiles(const __m512 q[2][2], __mmask16 lanes, float* out, int64_t ms) {
    __m512 w[2][4];
    for (int r = 0; r < 2; ++r) {
        w[r][0] = q[r][0];
        w[r][1] = _mm512_add_ps(q[r][0], q[r][1]);
        w[r][2] = _mm512_sub_ps(q[r][0], q[r][1]);
        w[r][3] = _mm512_sub_ps(_mm512_setzero_ps(), q[r][1]);
    }
    for (int k = 0; k < 4; ++k) {
        _mm512_mask_storeu_ps(out + k * ms, lanes, w[0][k]);
        _mm512_mask_storeu_ps(out + (4 + k) * ms, lanes, _mm512_add_ps(w[0][k], w[1][k]));
        _mm512_mask_storeu_ps(out + (8 + k) * ms, lanes, _mm512_sub_ps(w[0][k], w[1][k]));
        _mm512_mask_storeu_ps(out + (12 + k) * ms, lanes, _mm512_sub_ps(_mm512_setzero_ps(), w[1][k]));
    }
}

// Larger maps: one tile row of gy (output rows y0, y1), tiles [0, tw), into out[xi * ms + j].
void gy_tiles(const float* y0, const float* y1, int64_t tw, float* out, int64_t ms) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int64_t j0 = 0; j0 < tw; j0 += 16) {
        const int64_t n = std::min<int64_t>(16, tw - j0), floats = 2 * n;
        const __mmask16 lo = floats >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << floats) - 1);
        const __mmask16 hi = floats > 16 ? static_cast<__mmask16>((1u << (floats - 16)) - 1) : 0;
        __m512 q[2][2];
        const float* rows[2] = {y0 + 2 * j0, y1 + 2 * j0};
        for (int r = 0; r < 2; ++r) {
            const __m512 l = _mm512_maskz_loadu_ps(lo, rows[r]), h = _mm512_maskz_loadu_ps(hi, rows[r] + 16);
            q[r][0] = _mm512_permutex2var_ps(l, even, h);
            q[r][1] = _mm512_permutex2var_ps(l, odd, h);
        }
        store_gy_tiles(q, static_cast<__mmask16>((1u << n) - 1), out + j0, ms);
    }
}

// Small maps: one image's gy plane of one channel, its tiles gathered into one vector each (the output scatter's
// offsets, read instead of written).
void gy_tiles_gathered(const float* plane, const __m512i offsets[4], __mmask16 lanes, float* out, int64_t ms) {
    __m512 q[2][2];
    for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c)
            q[r][c] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, offsets[r * 2 + c], plane, 4);
    store_gy_tiles(q, lanes, out, ms);
}

// Gather offsets of a small map's tiles: in[a * 4 + b][t] = (2i - 1 + a) W + 2j - 1 + b (the 4x4 input tiles, with
// inside[a * 4 + b] the lanes inside the image), out[r * 2 + s][t] = (2i + r) W + 2j + s (the 2x2 output tiles).
struct TileOffsets {
    __m512i in[16], out[4];
    __mmask16 inside[16] = {}, lanes;
    TileOffsets(int64_t H, int64_t W) {
        const int64_t tw = W / 2, tiles = (H / 2) * tw;
        alignas(64) int32_t a_b[16][16] = {}, r_s[4][16] = {};
        for (int64_t t = 0; t < tiles; ++t) {
            const int64_t i = t / tw, j = t % tw;
            for (int a = 0; a < 4; ++a)
                for (int b = 0; b < 4; ++b) {
                    const int64_t row = 2 * i - 1 + a, col = 2 * j - 1 + b;
                    a_b[a * 4 + b][t] = static_cast<int32_t>(row * W + col);
                    if (row >= 0 && row < H && col >= 0 && col < W) inside[a * 4 + b] |= static_cast<__mmask16>(1u << t);
                }
            for (int r = 0; r < 2; ++r)
                for (int c = 0; c < 2; ++c) r_s[r * 2 + c][t] = static_cast<int32_t>((2 * i + r) * W + 2 * j + c);
        }
        for (int k = 0; k < 16; ++k) in[k] = _mm512_load_si512(a_b[k]);
        for (int k = 0; k < 4; ++k) out[k] = _mm512_load_si512(r_s[k]);
        lanes = static_cast<__mmask16>((1u << tiles) - 1);
    }
};

// nb images of a small map: all their tiles side by side, T = nb * tiles.
void conv_images(const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W, int64_t nb,
                 const float* bias, float* y, float* scratch) {
    const int64_t tiles = (H / 2) * (W / 2), T = nb * tiles;
    const TileOffsets at(H, W);
    const int64_t vs = C * T + kWinogradSkew, ms = OC * T + kWinogradSkew;
    float* V = scratch;             // (16, C, T)
    float* M = scratch + 16 * vs;   // (16, OC, T)
    for (int64_t k = 0; k < nb; ++k)
        for (int64_t c = 0; c < C; ++c)
            input_tiles_gathered(x + (k * C + c) * H * W, at.in, at.inside, at.lanes, V + c * T + k * tiles, vs);
    for (int xi = 0; xi < 16; ++xi)
        gemm(false, false, OC, T, C, 1.f, u + xi * OC * C, C, V + xi * vs, T, 0.f, M + xi * ms, T);
    for (int64_t k = 0; k < nb; ++k)
        for (int64_t oc = 0; oc < OC; ++oc)
            output_tiles_scattered(M + oc * T + k * tiles, ms, at.out, at.lanes, bias ? bias[oc] : 0.f,
                                   y + (k * OC + oc) * H * W);
}

// One image of a larger map, in bands of tile rows.
void conv_image(const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W, const float* bias,
                float* y, float* scratch) {
    const int64_t th = H / 2, tw = W / 2;
    const int64_t rows = winograd_band_rows(C, OC, th, tw);
    for (int64_t i0 = 0; i0 < th; i0 += rows) {
        const int64_t i1 = std::min(th, i0 + rows), T = (i1 - i0) * tw;   // tiles in this band
        // The 16 matrices of V (and of M) are a cache line further apart than their size: at exactly C T floats
        // (16 KB for 16 channels x 256 tiles) the transforms' 16 streams would all map to the same L1 sets.
        const int64_t vs = C * T + kWinogradSkew, ms = OC * T + kWinogradSkew;
        float* V = scratch;        // (16, C, T)
        float* M = scratch + 16 * vs;   // (16, OC, T)
        // V[xi][c][t] = (B^T d B)[xi] for the 4x4 input tile d of tile t = (i, j): rows 2i-1..2i+2, columns
        // 2j-1..2j+2 of channel c, zero outside the image.
        for (int64_t c = 0; c < C; ++c)
            for (int64_t i = i0; i < i1; ++i) {
                const float* r[4];
                tile_rows_of(x + c * H * W, H, W, i, r);
                input_tiles(r, tw, V + c * T + (i - i0) * tw, vs);
            }
        // M[xi] (OC, T) = U[xi] (OC, C) . V[xi] (C, T)
        for (int xi = 0; xi < 16; ++xi)
            gemm(false, false, OC, T, C, 1.f, u + xi * OC * C, C, V + xi * vs, T, 0.f, M + xi * ms, T);
        // Y = A^T m A per tile, plus the bias.
        for (int64_t oc = 0; oc < OC; ++oc)
            for (int64_t i = i0; i < i1; ++i) {
                float* y0 = y + (oc * H + 2 * i) * W;
                output_tiles(M + oc * T + (i - i0) * tw, ms, tw, bias ? bias[oc] : 0.f, y0, y0 + W);
            }
    }
}

}  // namespace

void winograd_conv3x3_avx512(const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W, int64_t nb,
                      const float* bias, float* y, float* scratch) {
    if (winograd_small_map(H, W)) return conv_images(u, OC, C, x, H, W, nb, bias, y, scratch);
    for (int64_t k = 0; k < nb; ++k) conv_image(u, OC, C, x + k * C * H * W, H, W, bias, y + k * OC * H * W, scratch);
}

void winograd_filter_grad_avx512(int64_t OC, int64_t C, const float* x, const float* gy, int64_t H, int64_t W, int64_t nb,
                          bool accumulate, float* du, float* scratch) {
    const int64_t th = H / 2, tw = W / 2;
    // One set of 16 GEMMs per band of tiles: du[xi] (OC, C) += Gy[xi] (OC, T) . V[xi]^T (T, C).
    auto products = [&](const float* V, int64_t vs, const float* G, int64_t ms, int64_t T) {
        for (int xi = 0; xi < 16; ++xi)
            gemm(false, true, OC, C, T, 1.f, G + xi * ms, T, V + xi * vs, T, accumulate ? 1.f : 0.f, du + xi * OC * C, C);
        accumulate = true;
    };
    if (winograd_small_map(H, W)) {
        const int64_t tiles = th * tw, T = nb * tiles, vs = C * T + kWinogradSkew, ms = OC * T + kWinogradSkew;
        const TileOffsets at(H, W);
        float* V = scratch;             // (16, C, T)
        float* G = scratch + 16 * vs;   // (16, OC, T)
        for (int64_t k = 0; k < nb; ++k) {
            for (int64_t c = 0; c < C; ++c)
                input_tiles_gathered(x + (k * C + c) * H * W, at.in, at.inside, at.lanes, V + c * T + k * tiles, vs);
            for (int64_t oc = 0; oc < OC; ++oc)
                gy_tiles_gathered(gy + (k * OC + oc) * H * W, at.out, at.lanes, G + oc * T + k * tiles, ms);
        }
        return products(V, vs, G, ms, T);
    }
    const int64_t rows = winograd_band_rows(C, OC, th, tw);
    for (int64_t k = 0; k < nb; ++k) {
        const float* xk = x + k * C * H * W;
        const float* gk = gy + k * OC * H * W;
        for (int64_t i0 = 0; i0 < th; i0 += rows) {
            const int64_t i1 = std::min(th, i0 + rows), T = (i1 - i0) * tw;
            const int64_t vs = C * T + kWinogradSkew, ms = OC * T + kWinogradSkew;
            float* V = scratch;
            float* G = scratch + 16 * vs;
            for (int64_t c = 0; c < C; ++c)
                for (int64_t i = i0; i < i1; ++i) {
                    const float* r[4];
                    tile_rows_of(xk + c * H * W, H, W, i, r);
                    input_tiles(r, tw, V + c * T + (i - i0) * tw, vs);
                }
            for (int64_t oc = 0; oc < OC; ++oc)
                for (int64_t i = i0; i < i1; ++i) {
                    const float* y0 = gk + (oc * H + 2 * i) * W;
                    gy_tiles(y0, y0 + W, tw, G + oc * T + (i - i0) * tw, ms);
                }
            products(V, vs, G, ms, T);
        }
    }
}


}  // namespace razor::detail

#endif  // __AVX512F__
