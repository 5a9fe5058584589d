// core/conv_im2col.cpp -- im2col + GEMM conv kernels (see conv_im2col.h).
#include "core/conv_im2col.h"

#include <algorithm>
#include <vector>

#if defined(__AVX512F__)
// GCC 12 reports false "may be used uninitialized" warnings inside avx512fintrin.h's permute intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/gemm.h"
#include "core/saved.h"
#include "core/tensor.h"

namespace razor::detail {
namespace {

// Stride 1 with OW == W ("same" width, e.g. 3x3 pad 1): output position p = oh*OW + ow reads input position
// p + shift of the same channel plane, so a row of col is one shifted copy of the plane; only the positions
// whose ow falls outside [ow_lo, ow_hi) picked up a neighbouring input row and must be zeroed.
bool shifted_rows(const ConvGeometry& g) { return g.sh == 1 && g.sw == 1 && g.OW == g.W; }

// Zeroes n floats. The runs here are mostly padding borders of 1..16 floats; a memset call (which the
// compiler also makes of a plain zeroing loop) costs more than that, so short runs are one masked store.
inline void zero_floats(float* p, int64_t n) {
#if defined(__AVX512F__)
    if (n <= 16) {
        if (n > 0) _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), _mm512_setzero_ps());
        return;
    }
#endif
    std::fill(p, p + n, 0.f);
}

// Zeroes columns [0, ow_lo) and [ow_hi, OW) of rows [oh_lo, oh_hi) of a (OH, OW) row-major plane.
void zero_edge_columns(float* plane, int64_t oh_lo, int64_t oh_hi, int64_t OW, int64_t ow_lo, int64_t ow_hi) {
    if (ow_lo > 0)
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) zero_floats(plane + oh * OW, ow_lo);
    if (ow_hi < OW)
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) zero_floats(plane + oh * OW + ow_hi, OW - ow_hi);
}

// Output rows are processed in tiles of about this many output positions, so that the im2col tile
// (C*KK x tile) and Eigen's packed copy of it stay in L2 while the GEMM reads them. (256 and 512 measured
// alike on the ResNet-20 shapes; 256 keeps a 64-channel 3x3 tile at 590 KB.)
constexpr int64_t kTilePositions = 256;
int64_t tile_rows(const ConvGeometry& g) { return std::clamp<int64_t>(kTilePositions / g.OW, 1, g.OH); }

// The output rows [lo, hi) of the tile [oh0, oh1) at which the tap reads inside the image (lo == hi: none).
void tile_valid_rows(const ConvTap& t, int64_t oh0, int64_t oh1, int64_t& lo, int64_t& hi) {
    lo = std::max(t.oh_lo, oh0);
    hi = std::max(std::min(t.oh_hi, oh1), lo);
}

// col (C*KK, T) = the columns of im2col(x) for output rows [oh0, oh1), T = (oh1 - oh0) * OW, for one image
// x (C, H, W): row (c, kh, kw) holds x[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] (0 in the padding).
// ld: col's row stride (>= T).
void im2col(const ConvGeometry& g, const float* x /*(C, H, W)*/, float* col /*(C*KK, T)*/, int64_t ld, int64_t oh0,
            int64_t oh1) {
    const int64_t OW = g.OW, base = oh0 * OW, cols = (oh1 - oh0) * OW;
    const bool shifted = shifted_rows(g);
    for (int64_t c = 0; c < g.C; ++c)
        for_each_tap(g, [=](const ConvTap& t) {   // by value: the bounds stay in registers across the stores
            int64_t lo, hi;
            tile_valid_rows(t, oh0, oh1, lo, hi);
            const int64_t ow_lo = t.ow_lo, ow_hi = t.ow_hi, iw0 = t.iw0;   // iw = ow*sw + iw0
            float* row = col + ((c * g.KH + t.kh) * g.KW + t.kw) * ld;     // (oh1 - oh0, OW)
            const float* plane = x + c * g.hw();                             // (H, W)
            if (lo == hi || ow_lo == ow_hi) {                                // the tap sees only padding in this tile
                zero_floats(row, cols);
                return;
            }
            if (shifted) {
                // One copy from the first to the last valid position, then zero what lies outside.
                const int64_t shift = t.ih0 * g.W + iw0;
                const int64_t p0 = lo * OW + ow_lo, p1 = (hi - 1) * OW + ow_hi;   // absolute positions
                zero_floats(row, p0 - base);
                std::copy(plane + p0 + shift, plane + p1 + shift, row + (p0 - base));
                zero_floats(row + (p1 - base), cols - (p1 - base));
                zero_edge_columns(row, lo - oh0, hi - oh0, OW, ow_lo, ow_hi);
                return;
            }
            zero_floats(row, (lo - oh0) * OW);
            for (int64_t oh = lo; oh < hi; ++oh) {
                float* dst = row + (oh - oh0) * OW;
                const float* src = plane + (oh * g.sh + t.ih0) * g.W;   // input row ih
                // Rows are short (8..32): plain loops and masked stores, no library calls.
                zero_floats(dst, ow_lo);
                if (g.sw == 1) {
#pragma omp simd
                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow + iw0];
                } else {
                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * g.sw + iw0];
                }
                zero_floats(dst + ow_hi, OW - ow_hi);
            }
            zero_floats(row + (hi - oh0) * OW, (oh1 - hi) * OW);
        });
}

// gx (C, H, W) += col2im(gcol) for output rows [oh0, oh1): the adjoint of im2col, each gcol entry is added to
// the input position im2col read it from. gcol is scratch: the fast path zeroes its entries that im2col
// would have zeroed.
void col2im(const ConvGeometry& g, float* gcol /*(C*KK, T)*/, int64_t ld, int64_t oh0, int64_t oh1,
            float* gx /*(C, H, W)*/) {
    const int64_t OW = g.OW, base = oh0 * OW;
    const bool shifted = shifted_rows(g);
    for (int64_t c = 0; c < g.C; ++c)
        for_each_tap(g, [=](const ConvTap& t) {   // by value: the bounds stay in registers across the stores
            int64_t lo, hi;
            tile_valid_rows(t, oh0, oh1, lo, hi);
            const int64_t ow_lo = t.ow_lo, ow_hi = t.ow_hi, iw0 = t.iw0;
            if (lo == hi || ow_lo == ow_hi) return;
            float* row = gcol + ((c * g.KH + t.kh) * g.KW + t.kw) * ld;
            float* plane = gx + c * g.hw();   // (H, W)
            if (shifted) {   // zero the wrapped positions, then one shifted add
                zero_edge_columns(row, lo - oh0, hi - oh0, OW, ow_lo, ow_hi);
                const int64_t shift = t.ih0 * g.W + iw0;
                const int64_t p0 = lo * OW + ow_lo, p1 = (hi - 1) * OW + ow_hi;
                float* dst = plane + shift;
                const float* src = row - base;
#pragma omp simd
                for (int64_t p = p0; p < p1; ++p) dst[p] += src[p];
                return;
            }
            for (int64_t oh = lo; oh < hi; ++oh) {
                const float* src = row + (oh - oh0) * OW;
                float* dst = plane + (oh * g.sh + t.ih0) * g.W;
                if (g.sw == 1) {
#pragma omp simd
                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow + iw0] += src[ow];
                } else {
                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow * g.sw + iw0] += src[ow];
                }
            }
        });
}

// ---------------------------------------------------------------- tiles, buffers and the variants

// Images per GEMM. A map of at most kTilePositions / 2 output positions (8x8 and smaller on CIFAR) is one small GEMM
// per image: 64 columns, or 4 on vgg's 2x2 maps, which fill few SIMD lanes of the output tile, and the gW product
// becomes a read-modify-write of all of gW for a K of 4..64 steps. Such images are batched side by side instead
// (Im2colBatched), col (C*KK, nb*OHW), so one GEMM covers nb images; the output goes through a (OC, nb*OHW) buffer
// and is copied out per image (forward), and gy is gathered into one (backward), O(OC*OHW) copies against
// O(OC*C*KK*OHW) MACs.
int64_t images_per_gemm(const ConvGeometry& g) {
    return g.ohw() > 0 && g.ohw() * 2 <= kTilePositions ? kTilePositions / g.ohw() : 1;
}

constexpr int64_t kSmallRow = 8;   // output rows shorter than this use the tables (8x8 maps: row copies measured ~2 % faster)

// How a variant runs a geometry: images per GEMM (nb > 1: Im2colBatched), whether x[n] is read in place (Gemm1x1),
// output rows per tile (one image at a time), and whether im2col/col2im go through tap tables (small rows).
struct Plan {
    int64_t nb = 1;
    bool in_place = false;
    int64_t rows = 1;
    bool tables = false;
};

Plan make_plan(const ConvGeometry& g, ConvAlgorithm variant) {
    RAZOR_CHECK(conv2d_im2col_supports(variant, g))
        << "conv2d: the im2col family cannot run " << conv_algorithm_name(variant) << " on this geometry";
    Plan p;
    p.nb = variant == ConvAlgorithm::Im2colBatched ? images_per_gemm(g) : 1;
    p.in_place = variant == ConvAlgorithm::Gemm1x1;
    p.rows = p.in_place ? g.OH : tile_rows(g);
    // Small maps (batched images, output rows shorter than kSmallRow): the source of every (tap, output position)
    // pair as an offset into the (H, W) plane, or -1 in the padding, computed once per call (tap_sources). im2col
    // and col2im then run one flat loop per channel and tap instead of per-output-row loops, whose per-row overheads
    // dominated on rows of 2-8 floats (4x4 and 2x2 maps: 11 % of a vgg19_bn step in im2col and col2im).
    p.tables = p.nb > 1 && g.OW < kSmallRow;
    return p;
}

// A GEMM tile: output rows [oh0, oh1) of one image (nb == 1), or nb whole images side by side. The im2col tile
// buffer holds (C*KK, cols()) with row stride cols().
struct Tile {
    int64_t n, nb, oh0, oh1;
    int64_t cols(const ConvGeometry& g) const { return nb * (oh1 - oh0) * g.OW; }
};

// The tiles of images [n0, n1) in order: runs of up to p.nb images, or tiles of p.rows rows.
template <class F>
void for_each_tile(const ConvGeometry& g, const Plan& p, int64_t n0, int64_t n1, const F& f) {
    const int64_t nb = p.nb, rows = p.rows;
    for (int64_t n = n0; n < n1; n += nb == 1 ? 1 : nb) {
        if (nb > 1) {
            f(Tile{n, std::min(nb, n1 - n), 0, g.OH});
            continue;
        }
        for (int64_t oh0 = 0; oh0 < g.OH; oh0 += rows) f(Tile{n, 1, oh0, std::min(oh0 + rows, g.OH)});
    }
}

// Floats of one chunk's im2col tile buffer (0: a lone pointwise image is read in place), and of its (OC, nb*OHW)
// staging buffer for batched images (0 when images are not batched).
int64_t col_floats(const ConvGeometry& g, const Plan& p) {
    if (p.nb > 1) return g.C * g.kk() * p.nb * g.ohw();
    return p.in_place ? 0 : g.C * g.kk() * p.rows * g.OW;
}
int64_t staging_floats(const ConvGeometry& g, const Plan& p) { return p.nb > 1 ? g.OC * p.nb * g.ohw() : 0; }

std::vector<int32_t> tap_sources(const ConvGeometry& g) {
    std::vector<int32_t> src(static_cast<size_t>(g.kk() * g.ohw()));   // (KK, OHW)
    for (int64_t kh = 0, r = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw)
            for (int64_t oh = 0; oh < g.OH; ++oh)
                for (int64_t ow = 0; ow < g.OW; ++ow, ++r) {
                    const int64_t ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
                    src[r] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? static_cast<int32_t>(ih * g.W + iw) : -1;
                }
    return src;
}

#if defined(__AVX512F__)
// Maps of at most 16 input and 16 output positions (the 4x4 and 2x2 maps of VGG and of compact subnetworks): a
// whole plane is one register, and a tap's row of im2col is a permutation of it -- vpermps with the tap's sources
// (tap_sources or tap_readers, row k) as lane indices, the padding's lanes (index -1) zeroed by the mask. One
// permute per (channel, tap) replaces a 16-lane gather (the gathers were 4 % of a vgg19_bn step).
constexpr int64_t kMaxPermuteTaps = 25;   // kernels up to 5x5
bool one_register_planes(const ConvGeometry& g) { return g.hw() <= 16 && g.ohw() <= 16 && g.kk() <= kMaxPermuteTaps; }
struct TapPermutes {
    __m512i index[kMaxPermuteTaps];
    __mmask16 valid[kMaxPermuteTaps];
    // Row k of a (kk, n) table of lane indices (-1: none) as permutes over n <= 16 lanes.
    TapPermutes(const int32_t* table, int64_t kk, int64_t n) {
        const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1u);
        for (int64_t k = 0; k < kk; ++k) {
            index[k] = _mm512_maskz_loadu_epi32(lanes, table + k * n);
            valid[k] = _mm512_mask_cmpge_epi32_mask(lanes, index[k], _mm512_setzero_si512());
        }
    }
};
#endif

// col (C*KK, OHW), row stride ld = im2col of one whole image x (C, H, W), through tap_sources.
void im2col_small(const ConvGeometry& g, const int32_t* src, const float* x, float* col, int64_t ld) {
    const int64_t ohw = g.ohw(), kk = g.kk();
#if defined(__AVX512F__)
    if (one_register_planes(g)) {
        const TapPermutes taps(src, kk, ohw);
        const __mmask16 in = static_cast<__mmask16>((1u << g.hw()) - 1u), out = static_cast<__mmask16>((1u << ohw) - 1u);
        for (int64_t c = 0; c < g.C; ++c) {
            const __m512 plane = _mm512_maskz_loadu_ps(in, x + c * g.hw());
            for (int64_t k = 0; k < kk; ++k)
                _mm512_mask_storeu_ps(col + (c * kk + k) * ld, out,
                                      _mm512_maskz_permutexvar_ps(taps.valid[k], taps.index[k], plane));
        }
        return;
    }
#endif
    for (int64_t c = 0; c < g.C; ++c) {
        const float* plane = x + c * g.hw();
        for (int64_t k = 0; k < kk; ++k) {
            const int32_t* s = src + k * ohw;
            float* row = col + (c * kk + k) * ld;
#pragma omp simd
            for (int64_t p = 0; p < ohw; ++p) {
                const float v = plane[std::max(s[p], 0)];   // in bounds even where s = -1 (then discarded)
                row[p] = s[p] >= 0 ? v : 0.f;
            }
        }
    }
}

// The inverse of tap_sources: for each tap k and input position q, the output position p that reads q through k
// (at most one: for a fixed tap, p -> q is injective), or -1. (KK, H*W).
std::vector<int32_t> tap_readers(const ConvGeometry& g, const std::vector<int32_t>& src) {
    std::vector<int32_t> inv(static_cast<size_t>(g.kk() * g.hw()), -1);
    for (int64_t k = 0; k < g.kk(); ++k)
        for (int64_t p = 0; p < g.ohw(); ++p)
            if (const int32_t q = src[k * g.ohw() + p]; q >= 0) inv[k * g.hw() + q] = static_cast<int32_t>(p);
    return inv;
}

// gx (C, H, W) += col2im(gcol) for one whole image, the adjoint of im2col_small, as a gather over the readers of
// each input position (contiguous stores, no scatter).
void col2im_small(const ConvGeometry& g, const int32_t* readers, const float* gcol, int64_t ld, float* gx) {
    const int64_t hw = g.hw(), kk = g.kk();
#if defined(__AVX512F__)
    if (one_register_planes(g)) {   // the plane stays in a register over the taps (same order of additions)
        const TapPermutes taps(readers, kk, hw);
        const __mmask16 in = static_cast<__mmask16>((1u << hw) - 1u), out = static_cast<__mmask16>((1u << g.ohw()) - 1u);
        for (int64_t c = 0; c < g.C; ++c) {
            __m512 plane = _mm512_maskz_loadu_ps(in, gx + c * hw);
            for (int64_t k = 0; k < kk; ++k) {
                const __m512 row = _mm512_maskz_loadu_ps(out, gcol + (c * kk + k) * ld);
                plane = _mm512_mask_add_ps(plane, taps.valid[k], plane, _mm512_permutexvar_ps(taps.index[k], row));
            }
            _mm512_mask_storeu_ps(gx + c * hw, in, plane);
        }
        return;
    }
#endif
    for (int64_t c = 0; c < g.C; ++c) {
        float* plane = gx + c * hw;
        for (int64_t k = 0; k < kk; ++k) {
            const int32_t* r = readers + k * hw;
            const float* row = gcol + (c * kk + k) * ld;
#pragma omp simd
            for (int64_t q = 0; q < hw; ++q) {
                const float v = row[std::max(r[q], 0)];   // in bounds even where r = -1 (then discarded)
                plane[q] += r[q] >= 0 ? v : 0.f;
            }
        }
    }
}

// The GEMM operand of tile t: its im2col (C*KK, cols) in col, or a lone pointwise image's rows read in place.
// image(i) gives image t.n + i as (C, H, W); src: tap_sources when the rows are small, else null. Returns the
// operand and sets its row stride.
template <class Image>
const float* tile_operand(const ConvGeometry& g, const Plan& p, const Tile& t, const Image& image, const int32_t* src,
                          float* col, int64_t& ld) {
    if (p.in_place) {
        ld = g.ohw();
        return image(0) + t.oh0 * g.OW;
    }
    ld = t.cols(g);
    for (int64_t i = 0; i < t.nb; ++i) {
        if (src) im2col_small(g, src, image(i), col + i * g.ohw(), ld);
        else im2col(g, image(i), col + i * g.ohw(), ld, t.oh0, t.oh1);
    }
    return col;
}

}  // namespace

int64_t im2col_images_per_gemm(const ConvGeometry& g) { return images_per_gemm(g); }

bool conv2d_im2col_supports(ConvAlgorithm variant, const ConvGeometry& g) {
    switch (variant) {
        case ConvAlgorithm::Im2col: return true;
        case ConvAlgorithm::Im2colBatched: return images_per_gemm(g) > 1;
        case ConvAlgorithm::Gemm1x1: return g.pointwise();
        default: return false;
    }
}

void conv2d_im2col_forward(const ConvGeometry& g, ConvAlgorithm variant, const float* x /*(N, C, H, W)*/,
                           const float* w /*(OC, Cg, KH, KW)*/, const float* b /*(OC) or null*/,
                           float* y /*(N, OC, OH, OW)*/) {
    const Plan p = make_plan(g, variant);
    const int64_t ohw = g.ohw(), cgkk = g.Cg * g.kk(), image = g.C * g.hw();
    const int64_t col_size = col_floats(g, p), per_chunk = col_size + staging_floats(g, p);
    const int64_t chunks = batch_chunks(g.N);
    const std::vector<int32_t> src = p.tables ? tap_sources(g) : std::vector<int32_t>();
    const int32_t* src_table = src.empty() ? nullptr : src.data();
    Tensor workspace = Tensor::empty({chunks * per_chunk});   // per chunk: im2col tile, staging
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* col = ws + c * per_chunk;            // (C*KK, T)
        float* staging = col + col_size;             // (OC, nb*OHW) when images are batched
        for_each_tile(g, p, g.N * c / chunks, g.N * (c + 1) / chunks, [&](const Tile& t) {
            const int64_t T = t.cols(g);
            int64_t ld;
            const float* cols =
                tile_operand(g, p, t, [&](int64_t i) { return x + (t.n + i) * image; }, src_table, col, ld);
            // y tile (OC, T): straight into y[n] (row stride OHW) for one image, else into staging (stride T).
            float* yt = t.nb == 1 ? y + t.n * g.OC * ohw + t.oh0 * g.OW : staging;
            const int64_t ldy = t.nb == 1 ? ohw : T;
            if (b && t.nb == 1)
                for (int64_t oc = 0; oc < g.OC; ++oc) std::fill(yt + oc * ldy, yt + oc * ldy + T, b[oc]);
            for (int64_t gi = 0; gi < g.groups; ++gi)
                gemm(false, false, g.OCg, T, cgkk, 1.f, w + gi * g.OCg * cgkk, cgkk, cols + gi * cgkk * ld, ld,
                     b && t.nb == 1 ? 1.f : 0.f, yt + gi * g.OCg * ldy, ldy);
            if (t.nb == 1) return;
            for (int64_t i = 0; i < t.nb; ++i)   // staging (OC, nb, OHW) -> y[n + i] (OC, OHW), plus the bias
                for (int64_t oc = 0; oc < g.OC; ++oc) {
                    const float* src = staging + oc * T + i * ohw;
                    float* dst = y + ((t.n + i) * g.OC + oc) * ohw;
                    const float bias = b ? b[oc] : 0.f;
#pragma omp simd
                    for (int64_t p = 0; p < ohw; ++p) dst[p] = src[p] + bias;
                }
        });
    }
}

// y[n] = W . im2col(x[n]) per group, so with gy[n] = dL/dy[n] (OC, OHW), tile by tile (see Tile):
//   gW_gi (OCg, Cg*KK) = sum_n gy[n]_gi (OCg, OHW) . col_gi[n]^T (OHW, Cg*KK)   -- summed over the batch here,
//                        per chunk into its own partial, partials added at the end; exact for a dense x,
//                        approximate if x was razored
//   gcol_gi (Cg*KK, OHW) = W_gi^T (Cg*KK, OCg) . gy[n]_gi (OCg, OHW), gx[n] = col2im(gcol)   -- exact
//   (gb = sum over n, h, w of gy is computed by the caller.)
// One tile buffer per chunk serves both: im2col for the gW product, then gcol for gx. Batched images first gather
// their gy into the staging buffer (OC, nb*OHW).
// x comes either dense (x) or, when the tape kept it compressed (x_saved, a form with has_row_unpack(): Back Razor's
// bitmap + values), expanded one image at a time into the chunk's (C, H, W) scratch right before its im2col: no
// (N, C, H, W) transient, and the expanded image is still in cache when im2col reads it.
void conv2d_im2col_backward(const ConvGeometry& g, ConvAlgorithm variant, const float* x /*(N, C, H, W) or null*/,
                            const SavedTensor* x_saved, const float* w /*(OC, Cg, KH, KW) or null*/,
                            const float* gy /*(N, OC, OH, OW)*/, float* gx /*(N, C, H, W) or null*/,
                            float* gw /*(OC, Cg, KH, KW) or null*/) {
    const Plan p = make_plan(g, variant);
    const int64_t ohw = g.ohw(), cgkk = g.Cg * g.kk(), w_size = g.OC * cgkk, image = g.C * g.hw();
    const int64_t col_size = col_floats(g, p), staging_size = staging_floats(g, p);
    const int64_t scratch = gw && !x ? image : 0;
    const int64_t chunks = batch_chunks(g.N);
    const std::vector<int32_t> src = p.tables ? tap_sources(g) : std::vector<int32_t>();
    const std::vector<int32_t> readers = gx && !src.empty() ? tap_readers(g, src) : std::vector<int32_t>();
    const int32_t* src_table = src.empty() ? nullptr : src.data();
    // Per chunk: a tile buffer, a staging buffer, a gW^T partial (gw_from_transposed), an image scratch.
    const int64_t per_chunk = col_size + staging_size + (gw ? w_size : 0) + scratch;
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* col = ws + c * per_chunk;                                  // (C*KK, T)
        float* staging = col + col_size;                                  // (OC, nb*OHW) when images are batched
        float* gwt_c = staging + staging_size;                            // (groups, Cg*KK, OCg): gW^T partial
        float* x_img = staging + staging_size + (gw ? w_size : 0);        // (C, H, W) when x is expanded per image
        bool first = true;
        int64_t expanded = -1;   // the image now in x_img (an image's row tiles expand it once)
        for_each_tile(g, p, g.N * c / chunks, g.N * (c + 1) / chunks, [&](const Tile& t) {
            const int64_t T = t.cols(g);
            // gy tile (OC, T): read in place for one image (row stride OHW), else gathered into staging.
            const float* gyt = gy + t.n * g.OC * ohw + t.oh0 * g.OW;
            int64_t ldg = ohw;
            if (t.nb > 1) {
                for (int64_t i = 0; i < t.nb; ++i)
                    for (int64_t oc = 0; oc < g.OC; ++oc)
                        std::copy_n(gy + ((t.n + i) * g.OC + oc) * ohw, ohw, staging + oc * T + i * ohw);
                gyt = staging, ldg = T;
            }
            if (gw) {
                int64_t ld;
                const float* cols = tile_operand(g, p, t, [&](int64_t i) {
                    if (x) return x + (t.n + i) * image;
                    if (expanded != t.n + i) x_saved->unpack_rows(t.n + i, 1, x_img), expanded = t.n + i;
                    return static_cast<const float*>(x_img);
                }, src_table, col, ld);
                for (int64_t gi = 0; gi < g.groups; ++gi)   // gW_gi^T (Cg*KK, OCg) += col_gi . gy_gi^T
                    gemm(false, true, cgkk, g.OCg, T, 1.f, cols + gi * cgkk * ld, ld, gyt + gi * g.OCg * ldg, ldg,
                         first ? 0.f : 1.f, gwt_c + gi * cgkk * g.OCg, g.OCg);
                first = false;
            }
            if (!gx) return;
            if (p.in_place) {   // gx[n] = W^T . gy[n] directly, no col2im
                for (int64_t gi = 0; gi < g.groups; ++gi)
                    gemm(true, false, cgkk, T, g.OCg, 1.f, w + gi * g.OCg * cgkk, cgkk, gyt + gi * g.OCg * ldg, ldg,
                         0.f, gx + t.n * image + gi * cgkk * ohw + t.oh0 * g.OW, ohw);
                return;
            }
            for (int64_t gi = 0; gi < g.groups; ++gi)   // gcol (C*KK, T)
                gemm(true, false, cgkk, T, g.OCg, 1.f, w + gi * g.OCg * cgkk, cgkk, gyt + gi * g.OCg * ldg, ldg, 0.f,
                     col + gi * cgkk * T, T);
            for (int64_t i = 0; i < t.nb; ++i) {
                float* gxn = gx + (t.n + i) * image;   // (C, H, W)
                if (t.oh0 == 0) std::fill(gxn, gxn + image, 0.f);
                if (!readers.empty()) col2im_small(g, readers.data(), col + i * ohw, T, gxn);
                else col2im(g, col + i * ohw, T, t.oh0, t.oh1, gxn);
            }
        });
        if (gw && first) std::fill(gwt_c, gwt_c + w_size, 0.f);   // an empty batch
    }
    if (gw) gw_from_transposed(g, ws + col_size + staging_size, per_chunk, chunks, gw);
}

}  // namespace razor::detail
