// core/ops/conv2d.cpp -- 2-D convolution, NCHW: im2col + GEMM, a direct kernel for depthwise.
//
// reference: torch.nn.functional.conv2d. docs: docs/back-razor.md §5.3 (what a conv keeps), §6 and §6.4.
//
// Dimension letters: x (N, C, H, W), W (OC, Cg, KH, KW) with Cg = C / groups and OCg = OC / groups,
// y (N, OC, OH, OW); KK = KH * KW, OHW = OH * OW. The weight of group gi is the (OCg, Cg*KK) matrix
// W[gi*OCg : (gi+1)*OCg] and reads input channels gi*Cg : (gi+1)*Cg.
//
// Kernels:
//   im2col    col (C*KK, T) for T output positions of one image: row (c, kh, kw) holds
//             x[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] (0 in the padding); group gi's rows are the block
//             gi*Cg*KK : (gi+1)*Cg*KK. Built one tile of output rows at a time (T ~ 256 positions), so the
//             tile and Eigen's packed copy of it stay in L2 (1 MB here) while the GEMM reads them. With stride 1
//             and OW == W (3x3 pad 1) a col row is one shifted copy of the channel plane plus a few zeroed edge
//             entries instead of OH short row copies.
//   forward   y[n] (OC, T): per group, W_gi (OCg, Cg*KK) . col_gi (Cg*KK, T), started from the bias (beta = 1).
//   backward  per tile: gW_gi += gy_gi (OCg, T) . col_gi^T, then the same buffer takes
//             gcol_gi = W_gi^T . gy_gi and col2im adds it into gx[n].
//   pointwise 1x1, stride 1, no padding: col is x[n] itself (C, HW), so im2col and col2im are skipped.
//   batched   maps of at most 128 output positions (8x8 and smaller): nb images side by side in one GEMM
//             (images_per_gemm), so a 2x2 map's GEMM is not 4 columns wide.
//   padded    stride-1 "same" convs with one group on larger maps (the CIFAR 3x3 convs at 32x32 and 16x16): no
//             im2col at all; gemm_rows reads windows of zero-padded image planes (conv2d_forward_padded).
//   winograd  3x3 pad-1 convs on even maps with >= 10 channels in and out, 16x16 and larger or 8x8 and smaller:
//             forward, gx and gW by Winograd F(2x2, 3x3) (core/winograd.h), 2.25x fewer multiplies each; the
//             transforms read the unpadded planes with masked loads.
//   depthwise groups == C (Cg = 1, any OC = C * multiplier): a direct kernel; a (1, KK) x (KK, OHW) GEMM per
//             channel would waste the GEMM machinery.
//
// Threading: the batch is split into one chunk per thread, each with its own tile buffer (and in backward its
// own gW partial sum, added up at the end); the GEMMs inside run single-threaded. Measured against one big GEMM
// per group over the whole batch (col (C*KK, N*OHW) built in parallel, one Eigen-parallel GEMM, then a reorder
// of the (OC, N*OHW) result to NCHW), at batch 128 on 2 threads of this machine (AMD EPYC Zen 4, 1 MB L2 per
// core; bench/ and docs/bench-ops.md), forward / gW in ms, per image vs big GEMM:
//   16->16 32x32: 6.3 / 6.8 vs 40 / 20;  32->32 16x16: 4.9 / 5.4 vs 23 / 13;  64->64 8x8: 5.5 / 5.7 vs 11 / 13.
// Per image wins because its working set stays in L2, while the big GEMM streams a 75 MB col (16 channels at
// 32x32) through memory and pays an extra pass to reorder its result. With fewer images than threads
// (inference on one image) the images run one after another and gemm splits each GEMM over the threads.
//
// Saves: x as SaveKind::Activation, only if W needs a gradient (gW = sum_n g[n] . im2col(x[n])^T; Back Razor
//        prunes this one). W as SaveKind::Parameter (reference, 0 bytes), only if x needs a gradient (gx).
//        Nothing else: no im2col buffer is kept (backward rebuilds it from x, one image at a time), no output,
//        and the bias gradient needs only g. A compressed x (Back Razor) is expanded one image at a time into
//        scratch inside the gW loop (SavedTensor::unpack_rows), not into an (N, C, H, W) transient.
#include "core/ops/conv2d.h"

#include <algorithm>
#include <vector>

#if defined(__AVX512F__)
// GCC 12 reports false "may be used uninitialized" warnings inside avx512fintrin.h's permute intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

#include "core/autograd.h"
#include "core/check.h"
#include "core/gemm.h"
#include "core/runtime.h"
#include "core/winograd.h"

namespace razor {
namespace {

struct ConvGeometry {
    int64_t N, C, H, W;       // x
    int64_t OC, KH, KW;       // weight
    int64_t OH, OW;           // y
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t groups, Cg, OCg;

    int64_t kk() const { return KH * KW; }
    int64_t ohw() const { return OH * OW; }
    int64_t hw() const { return H * W; }
    bool pointwise() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
    bool depthwise() const { return groups > 1 && groups == C; }
};

// Output positions o in [lo, hi) whose input index i = o*stride - pad + off (off = k*dilation) lies in [0, in).
void valid_range(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t off, int64_t& lo, int64_t& hi) {
    const int64_t a = pad - off;            // i >= 0   <=>  o*stride >= a
    const int64_t c = in - 1 + a;           // i < in   <=>  o*stride <= c
    lo = a <= 0 ? 0 : (a + stride - 1) / stride;
    hi = c < 0 ? 0 : c / stride + 1;
    lo = std::min(lo, out);
    hi = std::clamp(hi, lo, out);
}

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

// The output rows [lo, hi) of [oh0, oh1) at which kernel row kh reads inside the image (lo == hi: none).
void tile_valid_rows(const ConvGeometry& g, int64_t kh, int64_t oh0, int64_t oh1, int64_t& lo, int64_t& hi) {
    valid_range(g.OH, g.H, g.sh, g.ph, kh * g.dh, lo, hi);
    lo = std::max(lo, oh0);
    hi = std::max(std::min(hi, oh1), lo);
}

// col (C*KK, T) = the columns of im2col(x) for output rows [oh0, oh1), T = (oh1 - oh0) * OW, for one image
// x (C, H, W): row (c, kh, kw) holds x[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] (0 in the padding).
// ld: col's row stride (>= T).
void im2col(const ConvGeometry& g, const float* x /*(C, H, W)*/, float* col /*(C*KK, T)*/, int64_t ld, int64_t oh0,
            int64_t oh1) {
    const int64_t OW = g.OW, base = oh0 * OW, cols = (oh1 - oh0) * OW;
    const bool shifted = shifted_rows(g);
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t kh = 0; kh < g.KH; ++kh) {
            int64_t lo, hi;
            tile_valid_rows(g, kh, oh0, oh1, lo, hi);
            for (int64_t kw = 0; kw < g.KW; ++kw) {
                float* row = col + ((c * g.KH + kh) * g.KW + kw) * ld;   // (oh1 - oh0, OW)
                int64_t ow_lo, ow_hi;
                valid_range(OW, g.W, g.sw, g.pw, kw * g.dw, ow_lo, ow_hi);
                const int64_t iw0 = kw * g.dw - g.pw;   // iw = ow*sw + iw0
                const float* plane = x + c * g.hw();      // (H, W)
                if (lo == hi || ow_lo == ow_hi) {         // the tap sees only padding in this tile
                    zero_floats(row, cols);
                    continue;
                }
                if (shifted) {
                    // One copy from the first to the last valid position, then zero what lies outside.
                    const int64_t shift = (kh * g.dh - g.ph) * g.W + iw0;
                    const int64_t p0 = lo * OW + ow_lo, p1 = (hi - 1) * OW + ow_hi;   // absolute positions
                    zero_floats(row, p0 - base);
                    std::copy(plane + p0 + shift, plane + p1 + shift, row + (p0 - base));
                    zero_floats(row + (p1 - base), cols - (p1 - base));
                    zero_edge_columns(row, lo - oh0, hi - oh0, OW, ow_lo, ow_hi);
                    continue;
                }
                zero_floats(row, (lo - oh0) * OW);
                for (int64_t oh = lo; oh < hi; ++oh) {
                    float* dst = row + (oh - oh0) * OW;
                    const float* src = plane + (oh * g.sh - g.ph + kh * g.dh) * g.W;   // input row ih
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
            }
        }
}

// gx (C, H, W) += col2im(gcol) for output rows [oh0, oh1): the adjoint of im2col, each gcol entry is added to
// the input position im2col read it from. gcol is scratch: the fast path zeroes its entries that im2col
// would have zeroed.
void col2im(const ConvGeometry& g, float* gcol /*(C*KK, T)*/, int64_t ld, int64_t oh0, int64_t oh1,
            float* gx /*(C, H, W)*/) {
    const int64_t OW = g.OW, base = oh0 * OW;
    const bool shifted = shifted_rows(g);
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t kh = 0; kh < g.KH; ++kh) {
            int64_t lo, hi;
            tile_valid_rows(g, kh, oh0, oh1, lo, hi);
            for (int64_t kw = 0; kw < g.KW; ++kw) {
                float* row = gcol + ((c * g.KH + kh) * g.KW + kw) * ld;
                int64_t ow_lo, ow_hi;
                valid_range(OW, g.W, g.sw, g.pw, kw * g.dw, ow_lo, ow_hi);
                if (lo == hi || ow_lo == ow_hi) continue;
                const int64_t iw0 = kw * g.dw - g.pw;
                float* plane = gx + c * g.hw();   // (H, W)
                if (shifted) {   // zero the wrapped positions, then one shifted add
                    zero_edge_columns(row, lo - oh0, hi - oh0, OW, ow_lo, ow_hi);
                    const int64_t shift = (kh * g.dh - g.ph) * g.W + iw0;
                    const int64_t p0 = lo * OW + ow_lo, p1 = (hi - 1) * OW + ow_hi;
                    float* dst = plane + shift;
                    const float* src = row - base;
#pragma omp simd
                    for (int64_t p = p0; p < p1; ++p) dst[p] += src[p];
                    continue;
                }
                for (int64_t oh = lo; oh < hi; ++oh) {
                    const float* src = row + (oh - oh0) * OW;
                    float* dst = plane + (oh * g.sh - g.ph + kh * g.dh) * g.W;
                    if (g.sw == 1) {
#pragma omp simd
                        for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow + iw0] += src[ow];
                    } else {
                        for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow * g.sw + iw0] += src[ow];
                    }
                }
            }
        }
}

// Batch chunks: one per thread when there are enough images, else one (and gemm splits each GEMM over the threads).
int64_t batch_chunks(int64_t N) {
    const int64_t threads = num_threads();
    return (threads > 1 && N >= threads) ? threads : 1;
}

// sums[oc] = sum over n, h, w of g[n, oc, h, w]  (double accumulation; g: (N, OC, HW)).
void channel_sums(const float* g, int64_t N, int64_t OC, int64_t hw, float* sums /*(OC)*/) {
#pragma omp parallel for schedule(static) if (N * OC * hw > (1 << 16))
    for (int64_t oc = 0; oc < OC; ++oc) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
            const float* p = g + (n * OC + oc) * hw;
            float s = 0.f;
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < hw; ++i) s += p[i];
            acc += s;
        }
        sums[oc] = static_cast<float>(acc);
    }
}

// ---------------------------------------------------------------- im2col + GEMM path

// Images per GEMM. A map of at most kTilePositions / 2 output positions (8x8 and smaller on CIFAR) is one small GEMM
// per image: 64 columns, or 4 on vgg's 2x2 maps, which fill few SIMD lanes of the output tile, and the gW product
// becomes a read-modify-write of all of gW for a K of 4..64 steps. Such images are batched side by side instead,
// col (C*KK, nb*OHW), so one GEMM covers nb images; the output goes through a (OC, nb*OHW) buffer and is copied
// out per image (forward), and gy is gathered into one (backward), O(OC*OHW) copies against O(OC*C*KK*OHW) MACs.
int64_t images_per_gemm(const ConvGeometry& g) {
    return g.ohw() > 0 && g.ohw() * 2 <= kTilePositions ? kTilePositions / g.ohw() : 1;
}

// A GEMM tile: output rows [oh0, oh1) of one image (nb == 1), or nb whole images side by side. The im2col tile
// buffer holds (C*KK, cols()) with row stride cols().
struct Tile {
    int64_t n, nb, oh0, oh1;
    int64_t cols(const ConvGeometry& g) const { return nb * (oh1 - oh0) * g.OW; }
};

// The tiles of images [n0, n1) in order: runs of up to images_per_gemm(g) images, or tiles of tile_rows(g) rows.
template <class F>
void for_each_tile(const ConvGeometry& g, int64_t n0, int64_t n1, const F& f) {
    const int64_t nb = images_per_gemm(g), rows = g.pointwise() ? g.OH : tile_rows(g);
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
int64_t col_floats(const ConvGeometry& g) {
    const int64_t nb = images_per_gemm(g);
    if (nb > 1) return g.C * g.kk() * nb * g.ohw();
    return g.pointwise() ? 0 : g.C * g.kk() * tile_rows(g) * g.OW;
}
int64_t staging_floats(const ConvGeometry& g) {
    const int64_t nb = images_per_gemm(g);
    return nb > 1 ? g.OC * nb * g.ohw() : 0;
}

constexpr int64_t kSmallRow = 8;   // output rows shorter than this use the tables (8x8 maps: row copies measured ~2 % faster)
// Small maps (the batched path, output rows shorter than kSmallRow): the source of every (tap, output position) pair as an offset into the (H, W) plane,
// or -1 in the padding, computed once per call. im2col and col2im then run one flat loop per channel and tap instead
// of per-output-row loops, whose per-row overheads dominated on rows of 2-8 floats (4x4 and 2x2 maps: 11 % of a
// vgg19_bn step in im2col and col2im).
bool small_rows(const ConvGeometry& g) { return images_per_gemm(g) > 1 && g.OW < kSmallRow; }
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
const float* tile_operand(const ConvGeometry& g, const Tile& t, const Image& image, const int32_t* src, float* col,
                          int64_t& ld) {
    if (t.nb == 1 && g.pointwise()) {
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

// gW is computed transposed, gW_gi^T (Cg*KK, OCg) = col_gi (Cg*KK, T) . gy_gi^T (T, OCg): the GEMM then packs
// gy (OCg x T) for its transposed operand instead of col (Cg*KK x T, KK times larger; that packing was 4 % of a
// resnet20 step), and each element is the same dot product over T in the same order. Here
// gw (OC, Cg*KK) = the sum of the chunks' partials (groups, Cg*KK, OCg) at parts + c * stride, in chunk order.
void gw_from_transposed(const ConvGeometry& g, const float* parts, int64_t stride, int64_t chunks, float* gw) {
    const int64_t cgkk = g.Cg * g.kk();
    for (int64_t gi = 0; gi < g.groups; ++gi)
        for (int64_t o = 0; o < g.OCg; ++o)
            for (int64_t r = 0; r < cgkk; ++r) {
                float sum = 0.f;
                for (int64_t c = 0; c < chunks; ++c) sum += parts[c * stride + (gi * cgkk + r) * g.OCg + o];
                gw[(gi * g.OCg + o) * cgkk + r] = sum;
            }
}

void conv2d_forward_padded(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y);
bool padded_path(const ConvGeometry& g);
bool winograd_path(const ConvGeometry& g);
void conv2d_forward_winograd(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y);
void conv2d_input_grad_winograd(const ConvGeometry& g, const float* w, const float* gy, float* gx);
void conv2d_weight_grad_winograd(const ConvGeometry& g, const float* x, const SavedTensor* x_saved, const float* gy,
                                 float* gw);

void conv2d_forward(const ConvGeometry& g, const float* x /*(N, C, H, W)*/, const float* w /*(OC, Cg, KH, KW)*/,
                    const float* b /*(OC) or null*/, float* y /*(N, OC, OH, OW)*/) {
    if (winograd_path(g)) return conv2d_forward_winograd(g, x, w, b, y);
    if (padded_path(g)) return conv2d_forward_padded(g, x, w, b, y);
    const int64_t ohw = g.ohw(), cgkk = g.Cg * g.kk(), image = g.C * g.hw();
    const int64_t col_size = col_floats(g), per_chunk = col_size + staging_floats(g);
    const int64_t chunks = batch_chunks(g.N);
    const std::vector<int32_t> src = small_rows(g) ? tap_sources(g) : std::vector<int32_t>();
    const int32_t* src_table = src.empty() ? nullptr : src.data();
    Tensor workspace = Tensor::empty({chunks * per_chunk});   // per chunk: im2col tile, staging
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* col = ws + c * per_chunk;            // (C*KK, T)
        float* staging = col + col_size;             // (OC, nb*OHW) when images are batched
        for_each_tile(g, g.N * c / chunks, g.N * (c + 1) / chunks, [&](const Tile& t) {
            const int64_t T = t.cols(g);
            int64_t ld;
            const float* cols = tile_operand(g, t, [&](int64_t i) { return x + (t.n + i) * image; }, src_table, col, ld);
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
// (N, C, H, W) transient, and the expanded image is still in cache when im2col reads it (spec §6.4).
void conv2d_backward_padded(const ConvGeometry& g, const float* x, const SavedTensor* x_saved, const float* w,
                            const float* gy, float* gx, float* gw);

void conv2d_backward(const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/, const SavedTensor* x_saved,
                     const float* w /*(OC, Cg, KH, KW) or null*/, const float* gy /*(N, OC, OH, OW)*/,
                     float* gx /*(N, C, H, W) or null*/, float* gw /*(OC, Cg, KH, KW) or null*/) {
    if (winograd_path(g)) {
        if (gw) conv2d_weight_grad_winograd(g, x, x_saved, gy, gw);
        if (gx) conv2d_input_grad_winograd(g, w, gy, gx);
        return;
    }
    if (padded_path(g)) return conv2d_backward_padded(g, x, x_saved, w, gy, gx, gw);
    const int64_t ohw = g.ohw(), cgkk = g.Cg * g.kk(), w_size = g.OC * cgkk, image = g.C * g.hw();
    const int64_t col_size = col_floats(g), staging_size = staging_floats(g);
    const int64_t scratch = gw && !x ? image : 0;
    const int64_t chunks = batch_chunks(g.N);
    const std::vector<int32_t> src = small_rows(g) ? tap_sources(g) : std::vector<int32_t>();
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
        for_each_tile(g, g.N * c / chunks, g.N * (c + 1) / chunks, [&](const Tile& t) {
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
                const float* cols = tile_operand(g, t, [&](int64_t i) {
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
            if (t.nb == 1 && g.pointwise()) {   // gx[n] = W^T . gy[n] directly, no col2im
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

// ---------------------------------------------------------------- padded-plane path (no im2col)
// Stride 1, dilation 1, one group, "same" padding (KH = 2 ph + 1, KW = 2 pw + 1): the 3x3 pad-1 convs of the CIFAR
// models, on maps too large for the batched path. Each image is copied once into zero-padded planes xp (C, Hp, Wp),
// Hp = H + 2 ph, Wp = W + 2 pw, each followed by 2 pw floats of slack (plane stride Pp = Hp Wp + 2 pw). On the
// padded-width output grid p = oh Wp + ow (ow < Wp; the columns ow >= OW = W are junk, computed and dropped):
//   y[oc, p] = sum_{c,kh,kw} W[oc, c, kh, kw] xp[c, p + kh Wp + kw]                                       -- exact
// so row (c, kh, kw) of im2col is the window of xp[c] that starts at kh Wp + kw, and gemm_rows reads the windows in
// place: no col is built (im2col and col2im were a quarter of a resnet20 step). The junk columns cost Wp / W more
// MACs (6 % at 32x32, 12 % at 16x16). Backward, with gy copied into zero-padded planes gp (OC, Hp, Wp) the same way
// (gy[oc, oh, ow] at gp[oc, (oh + ph) Wp + ow + pw]) and gy'[oc, p] = gp[oc, p + ph Wp + pw], zero in the junk columns:
//   gW[oc, (c, kh, kw)] = sum_p gy'[oc, p] xp[c, p + kh Wp + kw]                 -- exact for a dense x
//   gx[c, q] = sum_{oc,kh,kw} W[oc, c, kh, kw] gy[oc, ih + ph - kh, iw + pw - kw]       (q = ih Wp + iw)
//            = sum_{oc,a,b} Wf[c, (oc, a, b)] gp[oc, q + a Wp + b],   a = KH-1-kh, b = KW-1-kw, 2 ph = KH-1  -- exact
// (an out-of-range oh lands in gp's zero border), i.e. gemm_rows again over windows of gp, with Wf = W transposed
// per tap and flipped.
bool padded_path(const ConvGeometry& g) {
    return gemm_rows_available() && g.groups == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
           g.KH == 2 * g.ph + 1 && g.KW == 2 * g.pw + 1 && !g.pointwise() && images_per_gemm(g) == 1;
}

struct PaddedGrid {
    int64_t Hp, Wp, plane;   // padded height, width, plane stride (Hp Wp + slack)
    explicit PaddedGrid(const ConvGeometry& g)
        : Hp(g.H + 2 * g.ph), Wp(g.W + 2 * g.pw), plane((g.H + 2 * g.ph) * (g.W + 2 * g.pw) + 2 * g.pw) {}
    int64_t cols(const ConvGeometry& g) const { return g.OH * Wp; }   // output positions on the padded-width grid

    // The offsets of windows (ch, kh, kw) -- row ch * KK + kh * KW + kw of an implicit im2col -- into planes.
    std::vector<int64_t> windows(const ConvGeometry& g, int64_t channels) const {
        std::vector<int64_t> rows(static_cast<size_t>(channels * g.kk()));
        for (int64_t ch = 0, r = 0; ch < channels; ++ch)
            for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) rows[r++] = ch * plane + kh * Wp + kw;
        return rows;
    }
    // planes (channels, plane) = src (channels, h, w) inside a zero border of (top, left) = (ph, pw). One pass that
    // writes every float once: rows are short (8-32 floats), so plain loops, no memset/memcpy calls per row.
    void pad(const ConvGeometry& g, const float* src, int64_t channels, int64_t h, int64_t w, float* planes) const {
        for (int64_t ch = 0; ch < channels; ++ch) {
            float* d = planes + ch * plane;
            const float* s = src + ch * h * w;
            const int64_t head = g.ph * Wp + g.pw;   // top rows and the first row's left border
            for (int64_t i = 0; i < head; ++i) d[i] = 0.f;
            d += head;
            for (int64_t r = 0; r < h; ++r, s += w, d += Wp) {
#pragma omp simd
                for (int64_t i = 0; i < w; ++i) d[i] = s[i];
                for (int64_t i = w; i < Wp; ++i) d[i] = 0.f;   // right border, then the next row's left border
            }
            for (float* end = planes + (ch + 1) * plane; d < end; ++d) *d = 0.f;   // bottom rows and slack
        }
    }
    // dst (channels, h, w) = the valid columns of src (channels, h * Wp) on the padded-width grid, plus add[ch].
    void unpad(const float* src, int64_t channels, int64_t h, int64_t w, const float* add, float* dst) const {
        for (int64_t ch = 0; ch < channels; ++ch) {
            const float a = add ? add[ch] : 0.f;
            for (int64_t r = 0; r < h; ++r) {
                const float* s = src + (ch * h + r) * Wp;
                float* d = dst + (ch * h + r) * w;
#pragma omp simd
                for (int64_t i = 0; i < w; ++i) d[i] = s[i] + a;
            }
        }
    }
};

void conv2d_forward_padded(const ConvGeometry& g, const float* x /*(N, C, H, W)*/, const float* w /*(OC, C, KH, KW)*/,
                           const float* b /*(OC) or null*/, float* y /*(N, OC, OH, OW)*/) {
    const PaddedGrid pg(g);
    const int64_t T = pg.cols(g), ckk = g.C * g.kk();
    const std::vector<int64_t> rows = pg.windows(g, g.C);
    const int64_t per_chunk = g.C * pg.plane + g.OC * T;   // xp, y on the padded-width grid
    const int64_t chunks = batch_chunks(g.N);
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* xp = ws + c * per_chunk;    // (C, plane)
        float* yp = xp + g.C * pg.plane;   // (OC, T)
        for (int64_t n = g.N * c / chunks; n < g.N * (c + 1) / chunks; ++n) {
            pg.pad(g, x + n * g.C * g.hw(), g.C, g.H, g.W, xp);
            gemm_rows(false, g.OC, T, ckk, 1.f, w, ckk, nullptr, xp, 0, rows.data(), 0.f, yp, T);
            pg.unpad(yp, g.OC, g.OH, g.OW, b, y + n * g.OC * g.ohw());
        }
    }
}

void conv2d_backward_padded(const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/,
                            const SavedTensor* x_saved, const float* w /*(OC, C, KH, KW) or null*/,
                            const float* gy /*(N, OC, OH, OW)*/, float* gx /*(N, C, H, W) or null*/,
                            float* gw /*(OC, C, KH, KW) or null*/) {
    const PaddedGrid pg(g);
    const int64_t T = pg.cols(g), kk = g.kk(), ckk = g.C * kk, w_size = g.OC * ckk, image = g.C * g.hw();
    const std::vector<int64_t> x_rows = gw ? pg.windows(g, g.C) : std::vector<int64_t>();
    const std::vector<int64_t> g_rows = gx ? pg.windows(g, g.OC) : std::vector<int64_t>();
    std::vector<float> wf;   // (C, OC*KK): wf[c, (oc, a, b)] = W[oc, c, KH-1-a, KW-1-b]
    if (gx) {
        wf.resize(static_cast<size_t>(g.C * g.OC * kk));
        for (int64_t c = 0; c < g.C; ++c)
            for (int64_t oc = 0; oc < g.OC; ++oc)
                for (int64_t t = 0; t < kk; ++t) wf[(c * g.OC + oc) * kk + t] = w[(oc * g.C + c) * kk + (kk - 1 - t)];
    }
    const int64_t chunks = batch_chunks(g.N);
    // Per chunk: gp, xp (when gW), gx on the padded-width grid (when gx), a gW partial, an image scratch.
    const int64_t gp_size = g.OC * pg.plane, xp_size = gw ? g.C * pg.plane : 0, gxp_size = gx ? g.C * T : 0;
    const int64_t scratch = gw && !x ? image : 0;
    const int64_t per_chunk = gp_size + xp_size + gxp_size + (gw ? w_size : 0) + scratch;
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* gp = ws + c * per_chunk;             // (OC, plane)
        float* xp = gp + gp_size;                   // (C, plane)
        float* gxp = xp + xp_size;                  // (C, T)
        float* gwt_c = gxp + gxp_size;              // (C*KK, OC): gW^T partial
        float* x_img = gxp + gxp_size + (gw ? w_size : 0);
        bool first = true;
        for (int64_t n = g.N * c / chunks; n < g.N * (c + 1) / chunks; ++n) {
            pg.pad(g, gy + n * g.OC * g.ohw(), g.OC, g.OH, g.OW, gp);
            if (gw) {
                const float* xn = x ? x + n * image : (x_saved->unpack_rows(n, 1, x_img), x_img);
                pg.pad(g, xn, g.C, g.H, g.W, xp);
                gemm_rows(true, ckk, g.OC, T, 1.f, xp, 0, x_rows.data(), gp + g.ph * pg.Wp + g.pw, pg.plane, nullptr,
                          first ? 0.f : 1.f, gwt_c, g.OC);
                first = false;
            }
            if (gx) {
                gemm_rows(false, g.C, T, g.OC * kk, 1.f, wf.data(), g.OC * kk, nullptr, gp, 0, g_rows.data(), 0.f, gxp, T);
                pg.unpad(gxp, g.C, g.H, g.W, nullptr, gx + n * image);
            }
        }
        if (gw && first) std::fill(gwt_c, gwt_c + w_size, 0.f);   // an empty batch
    }
    if (gw) gw_from_transposed(g, ws + gp_size + xp_size + gxp_size, per_chunk, chunks, gw);
}

// ---------------------------------------------------------------- Winograd F(2x2, 3x3) (core/winograd.h)
// The 3x3 pad-1 convs of the CIFAR models at 32x32, 16x16 (one image per call, in bands of tile rows) and 8x8 and
// below (the tiles of several images per call). Forward: y = conv3x3(x). Input gradient: gx = conv3x3(gy) with the
// filters flipped and transposed (wf[c, oc] = W[oc, c, ::-1, ::-1], the padded path's identity above). Weight
// gradient: the adjoint (conv2d_weight_grad_winograd).
bool winograd_path(const ConvGeometry& g) {
    return detail::winograd_applies(g.KH, g.KW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups, g.C, g.OC, g.H, g.W);
}

// out (N, out_channels, H, W) = conv3x3(in (N, in_channels, H, W)) with transformed filters u, plus bias.
void winograd_over_batch(const ConvGeometry& g, const float* u, int64_t in_channels, int64_t out_channels,
                         const float* in, const float* bias, float* out) {
    const int64_t nb = detail::winograd_images_per_call(in_channels, out_channels, g.H, g.W);
    const int64_t per_chunk = detail::winograd_scratch_floats(in_channels, out_channels, g.H, g.W);
    const int64_t chunks = batch_chunks(g.N);
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t n1 = g.N * (c + 1) / chunks;
        for (int64_t n = g.N * c / chunks; n < n1; n += nb)
            detail::winograd_conv3x3(u, out_channels, in_channels, in + n * in_channels * g.hw(), g.H, g.W,
                                     std::min(nb, n1 - n), bias, out + n * out_channels * g.hw(), ws + c * per_chunk);
    }
}

void conv2d_forward_winograd(const ConvGeometry& g, const float* x /*(N, C, H, W)*/, const float* w /*(OC, C, 3, 3)*/,
                             const float* b /*(OC) or null*/, float* y /*(N, OC, H, W)*/) {
    std::vector<float> u(static_cast<size_t>(16 * g.OC * g.C));   // (16, OC, C)
    detail::winograd_filters(w, g.OC, g.C, false, u.data());
    winograd_over_batch(g, u.data(), g.C, g.OC, x, b, y);
}

void conv2d_input_grad_winograd(const ConvGeometry& g, const float* w /*(OC, C, 3, 3)*/,
                                const float* gy /*(N, OC, H, W)*/, float* gx /*(N, C, H, W)*/) {
    std::vector<float> uf(static_cast<size_t>(16 * g.C * g.OC));   // (16, C, OC): the flipped, transposed filters
    detail::winograd_filters(w, g.C, g.OC, true, uf.data());
    winograd_over_batch(g, uf.data(), g.OC, g.C, gy, nullptr, gx);
}

// gW (OC, C, 3, 3) = sum over the batch, by the adjoint of the forward's algebra: per chunk a dU (16, OC, C) partial
// from x and gy, summed over the chunks, then G^T dU G. Exact for a dense x, approximate if x was razored (expanded
// a few images at a time into the chunk's scratch, as on the other paths).
void conv2d_weight_grad_winograd(const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/,
                                 const SavedTensor* x_saved, const float* gy /*(N, OC, H, W)*/,
                                 float* gw /*(OC, C, 3, 3)*/) {
    const int64_t nb = detail::winograd_images_per_call(g.C, g.OC, g.H, g.W), image = g.C * g.hw();
    const int64_t scratch = detail::winograd_scratch_floats(g.C, g.OC, g.H, g.W), du_size = 16 * g.OC * g.C;
    const int64_t per_chunk = du_size + scratch + (x ? 0 : nb * image);
    const int64_t chunks = batch_chunks(g.N);
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* du = ws + c * per_chunk;           // (16, OC, C) partial
        float* x_imgs = du + du_size + scratch;   // (nb, C, H, W) when x is expanded
        const int64_t n1 = g.N * (c + 1) / chunks;
        bool first = true;
        for (int64_t n = g.N * c / chunks; n < n1; n += nb) {
            const int64_t k = std::min(nb, n1 - n);
            const float* xn = x ? x + n * image : (x_saved->unpack_rows(n, k, x_imgs), x_imgs);
            detail::winograd_filter_grad(g.OC, g.C, xn, gy + n * g.OC * g.hw(), g.H, g.W, k, !first, du,
                                         du + du_size);
            first = false;
        }
        if (first) std::fill(du, du + du_size, 0.f);   // an empty chunk
    }
    for (int64_t c = 1; c < chunks; ++c)
        for (int64_t i = 0; i < du_size; ++i) ws[i] += ws[c * per_chunk + i];
    detail::winograd_filter_grad_to_weights(ws, g.OC, g.C, gw);
}

// ---------------------------------------------------------------- depthwise (groups == C) direct kernels
// Output channel oc reads input channel ic = oc / mult, mult = OC / C, with its own KH x KW filter.

void depthwise_forward(const ConvGeometry& g, const float* x /*(N, C, H, W)*/, const float* w /*(OC, 1, KH, KW)*/,
                       const float* b /*(OC) or null*/, float* y /*(N, OC, OH, OW)*/) {
    const int64_t mult = g.OC / g.C, ohw = g.ohw(), OW = g.OW;
#pragma omp parallel for collapse(2) schedule(static) if (g.N * g.OC * ohw * g.kk() > (1 << 15))
    for (int64_t n = 0; n < g.N; ++n)
        for (int64_t oc = 0; oc < g.OC; ++oc) {
            const float* xp = x + (n * g.C + oc / mult) * g.hw();   // (H, W)
            const float* wk = w + oc * g.kk();                       // (KH, KW)
            float* yp = y + (n * g.OC + oc) * ohw;                   // (OH, OW)
            std::fill(yp, yp + ohw, b ? b[oc] : 0.f);
            for (int64_t kh = 0; kh < g.KH; ++kh) {
                int64_t oh_lo, oh_hi;
                valid_range(g.OH, g.H, g.sh, g.ph, kh * g.dh, oh_lo, oh_hi);
                for (int64_t kw = 0; kw < g.KW; ++kw) {
                    int64_t ow_lo, ow_hi;
                    valid_range(OW, g.W, g.sw, g.pw, kw * g.dw, ow_lo, ow_hi);
                    const int64_t iw0 = kw * g.dw - g.pw;
                    const float wv = wk[kh * g.KW + kw];
                    for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                        const float* src = xp + (oh * g.sh - g.ph + kh * g.dh) * g.W;
                        float* dst = yp + oh * OW;
                        if (g.sw == 1) {
#pragma omp simd
                            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] += wv * src[ow + iw0];
                        } else {
                            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] += wv * src[ow * g.sw + iw0];
                        }
                    }
                }
            }
        }
}

// y[n, oc, oh, ow] = b[oc] + sum_{kh,kw} w[oc, kh, kw] x[n, oc/mult, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw], so:
//   gx[n, ic, ih, iw] = sum over the (oc, kh, kw, oh, ow) that read it of w[oc, kh, kw] gy[n, oc, oh, ow]  -- exact
//   gw[oc, kh, kw]    = sum over n, oh, ow of gy[n, oc, oh, ow] x[n, ic, ih, iw]   -- summed over the batch here
//                       (each thread owns whole output channels); exact for a dense x
void depthwise_backward(const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/,
                        const float* w /*(OC, 1, KH, KW) or null*/, const float* gy /*(N, OC, OH, OW)*/,
                        float* gx /*(N, C, H, W) or null*/, float* gw /*(OC, 1, KH, KW) or null*/) {
    const int64_t mult = g.OC / g.C, ohw = g.ohw(), OW = g.OW, kk = g.kk();
    [[maybe_unused]] const bool big = g.N * g.OC * ohw * kk > (1 << 15);
    if (gx) {
#pragma omp parallel for collapse(2) schedule(static) if (big)
        for (int64_t n = 0; n < g.N; ++n)
            for (int64_t ic = 0; ic < g.C; ++ic) {
                float* gxp = gx + (n * g.C + ic) * g.hw();   // (H, W)
                std::fill(gxp, gxp + g.hw(), 0.f);
                for (int64_t oc = ic * mult; oc < (ic + 1) * mult; ++oc) {
                    const float* gp = gy + (n * g.OC + oc) * ohw;   // (OH, OW)
                    for (int64_t kh = 0; kh < g.KH; ++kh) {
                        int64_t oh_lo, oh_hi;
                        valid_range(g.OH, g.H, g.sh, g.ph, kh * g.dh, oh_lo, oh_hi);
                        for (int64_t kw = 0; kw < g.KW; ++kw) {
                            int64_t ow_lo, ow_hi;
                            valid_range(OW, g.W, g.sw, g.pw, kw * g.dw, ow_lo, ow_hi);
                            const int64_t iw0 = kw * g.dw - g.pw;
                            const float wv = w[oc * kk + kh * g.KW + kw];
                            for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                                float* dst = gxp + (oh * g.sh - g.ph + kh * g.dh) * g.W;
                                const float* src = gp + oh * OW;
                                if (g.sw == 1) {
#pragma omp simd
                                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow + iw0] += wv * src[ow];
                                } else {
                                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow * g.sw + iw0] += wv * src[ow];
                                }
                            }
                        }
                    }
                }
            }
    }
    if (gw) {
#pragma omp parallel for schedule(static) if (big)
        for (int64_t oc = 0; oc < g.OC; ++oc) {
            std::vector<double> acc(static_cast<size_t>(kk), 0.0);   // (KH, KW)
            for (int64_t n = 0; n < g.N; ++n) {
                const float* xp = x + (n * g.C + oc / mult) * g.hw();
                const float* gp = gy + (n * g.OC + oc) * ohw;
                for (int64_t kh = 0; kh < g.KH; ++kh) {
                    int64_t oh_lo, oh_hi;
                    valid_range(g.OH, g.H, g.sh, g.ph, kh * g.dh, oh_lo, oh_hi);
                    for (int64_t kw = 0; kw < g.KW; ++kw) {
                        int64_t ow_lo, ow_hi;
                        valid_range(OW, g.W, g.sw, g.pw, kw * g.dw, ow_lo, ow_hi);
                        const int64_t iw0 = kw * g.dw - g.pw;
                        float s = 0.f;
                        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                            const float* src = xp + (oh * g.sh - g.ph + kh * g.dh) * g.W;
                            const float* gr = gp + oh * OW;
                            if (g.sw == 1) {
#pragma omp simd reduction(+ : s)
                                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) s += gr[ow] * src[ow + iw0];
                            } else {
                                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) s += gr[ow] * src[ow * g.sw + iw0];
                            }
                        }
                        acc[static_cast<size_t>(kh * g.KW + kw)] += s;
                    }
                }
            }
            for (int64_t k = 0; k < kk; ++k) gw[oc * kk + k] = static_cast<float>(acc[static_cast<size_t>(k)]);
        }
    }
}

// ---------------------------------------------------------------- autograd node

struct Conv2dBackward final : Node {
    ConvGeometry geo{};
    std::vector<Tensor> backward(const Tensor& g_in) override {
        Tensor gy = g_in.contiguous();   // (N, OC, OH, OW)
        Tensor x, w, gx, gw, gb;
        if (needs_grad(0)) {
            w = ctx.unpack("W").contiguous();
            gx = Tensor::empty(edges()[0].shape);
        }
        const SavedTensor* x_saved = nullptr;   // expanded per image inside the kernel
        if (needs_grad(1)) {
            const SavedTensor& s = ctx.saved("x");
            if (s.has_row_unpack() && !geo.depthwise()) x_saved = &s;
            else x = ctx.unpack("x").contiguous();
            gw = Tensor::empty(edges()[1].shape);
        }
        if (gx.defined() || gw.defined()) {
            const float* px = x.defined() ? x.f32() : nullptr;
            const float* pw = w.defined() ? w.f32() : nullptr;
            float* pgx = gx.defined() ? gx.f32() : nullptr;
            float* pgw = gw.defined() ? gw.f32() : nullptr;
            if (geo.depthwise()) depthwise_backward(geo, px, pw, gy.f32(), pgx, pgw);
            else conv2d_backward(geo, px, x_saved, pw, gy.f32(), pgx, pgw);
        }
        if (needs_grad(2)) {
            // gb[oc] = sum over n, oh, ow of gy[n, oc, oh, ow]   -- exact
            gb = Tensor::empty({geo.OC});
            channel_sums(gy.f32(), geo.N, geo.OC, geo.ohw(), gb.f32());
        }
        return {gx, gw, gb};
    }
};

std::string pair_str(const std::array<int64_t, 2>& p) { return fmt("(", p[0], ", ", p[1], ")"); }

ConvGeometry check_conv2d(const Tensor& x, const Tensor& W, const Tensor& b, const Conv2dOptions& o) {
    if (!x.defined() || !W.defined()) throw Error("conv2d: got an undefined x or W; hint: pass both");
    for (const Tensor* t : {&x, &W, &b})
        if (t->defined() && t->dtype() != DType::F32)
            throw Error(fmt("conv2d: expected f32 tensors, got ", dtype_name(t->dtype()), " ", shape_str(t->shape()),
                            "; hint: convert images to f32 (and normalise) before the first conv"));
    if (x.dim() != 4)
        throw Error(fmt("conv2d: expected x (N, C, H, W), got ", shape_str(x.shape()),
                        "; hint: conv2d takes a batch of NCHW images; add a batch dim of 1 for a single image"));
    if (W.dim() != 4)
        throw Error(fmt("conv2d: expected W (OC, C/groups, KH, KW), got ", shape_str(W.shape()),
                        "; hint: a conv weight is 4-D"));
    for (int i = 0; i < 2; ++i) {
        if (o.stride[i] < 1)
            throw Error(fmt("conv2d: expected stride >= 1, got ", pair_str(o.stride), "; hint: use stride 1 or more"));
        if (o.dilation[i] < 1)
            throw Error(fmt("conv2d: expected dilation >= 1, got ", pair_str(o.dilation),
                            "; hint: dilation 1 is an ordinary conv"));
        if (o.padding[i] < 0)
            throw Error(fmt("conv2d: expected padding >= 0, got ", pair_str(o.padding), "; hint: crop the input instead"));
    }
    if (o.groups < 1)
        throw Error(fmt("conv2d: expected groups >= 1, got ", o.groups, "; hint: groups 1 is an ordinary conv"));
    ConvGeometry g{};
    g.N = x.size(0), g.C = x.size(1), g.H = x.size(2), g.W = x.size(3);
    g.OC = W.size(0), g.KH = W.size(2), g.KW = W.size(3);
    g.groups = o.groups;
    if (g.C % g.groups != 0)
        throw Error(fmt("conv2d: groups ", g.groups, " does not divide the ", g.C, " input channels of x ",
                        shape_str(x.shape()), "; hint: in_channels and out_channels must be multiples of groups"));
    if (g.OC % g.groups != 0)
        throw Error(fmt("conv2d: groups ", g.groups, " does not divide the ", g.OC, " output channels of W ",
                        shape_str(W.shape()), "; hint: in_channels and out_channels must be multiples of groups"));
    if (W.size(1) * g.groups != g.C)
        throw Error(fmt("conv2d: expected x (N, ", W.size(1) * g.groups, ", H, W), got ", shape_str(x.shape()),
                        "; hint: check in_channels or the preceding layer"));
    if (g.KH < 1 || g.KW < 1)
        throw Error(fmt("conv2d: expected a kernel of at least 1x1, got W ", shape_str(W.shape()),
                        "; hint: KH and KW are the last two dims of W"));
    g.sh = o.stride[0], g.sw = o.stride[1], g.ph = o.padding[0], g.pw = o.padding[1];
    g.dh = o.dilation[0], g.dw = o.dilation[1];
    g.Cg = g.C / g.groups, g.OCg = g.OC / g.groups;
    // OH = floor((H + 2 ph - dh (KH - 1) - 1) / sh) + 1, floor division as torch (<= 0: the kernel does not fit)
    auto out_size = [](int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride) {
        const int64_t num = in + 2 * pad - dil * (k - 1) - 1;
        return (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
    };
    g.OH = out_size(g.H, g.ph, g.dh, g.KH, g.sh);
    g.OW = out_size(g.W, g.pw, g.dw, g.KW, g.sw);
    if (g.OH <= 0 || g.OW <= 0)
        throw Error(fmt("conv2d: output size (", g.OH, ", ", g.OW, ") <= 0 for x ", shape_str(x.shape()),
                        " with kernel (", g.KH, ", ", g.KW, "), stride ", pair_str(o.stride), ", padding ",
                        pair_str(o.padding), ", dilation ", pair_str(o.dilation),
                        "; hint: the input is smaller than the dilated kernel; pad it or use a smaller kernel"));
    if (b.defined() && (b.dim() != 1 || b.size(0) != g.OC))
        throw Error(fmt("conv2d: expected bias (", g.OC, "), got ", shape_str(b.shape()),
                        "; hint: the bias has one value per output channel"));
    return g;
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& W_in, const Tensor& b_in, const Conv2dOptions& options) {
    const ConvGeometry geo = check_conv2d(x_in, W_in, b_in, options);
    Tensor x = x_in.contiguous();   // (N, C, H, W)
    Tensor W = W_in.contiguous();   // (OC, Cg, KH, KW)
    Tensor b = b_in.defined() ? b_in.contiguous() : Tensor();
    Tensor y = Tensor::empty({geo.N, geo.OC, geo.OH, geo.OW});
    const float* pb = b.defined() ? b.f32() : nullptr;
    if (geo.depthwise()) depthwise_forward(geo, x.f32(), W.f32(), pb, y.f32());
    else conv2d_forward(geo, x.f32(), W.f32(), pb, y.f32());
    if (auto node = record<Conv2dBackward>("conv2d", {x, W, b}, y)) {
        node->geo = geo;
        if (node->needs_grad(1)) node->ctx.save("x", x, SaveKind::Activation);
        if (node->needs_grad(0)) node->ctx.save("W", W, SaveKind::Parameter);
    }
    return y;
}

}  // namespace razor
