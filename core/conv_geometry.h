// core/conv_geometry.h -- the shape of one conv2d call, the names of the kernels that can run it, and the helpers
// every conv kernel family shares.
//
// reference: torch.nn.functional.conv2d (what the geometry means). docs: docs/ops.md "Conv kernels".
//
// conv2d (core/ops/conv2d.cpp) checks its arguments, builds a ConvGeometry, and select_algorithm picks one
// ConvAlgorithm per pass (forward, gx, gW); the kernels live one family per file:
//   core/conv_im2col.{h,cpp}      Im2col, Im2colBatched, Gemm1x1   (any geometry)
//   core/conv_planes.{h,cpp}      PaddedPlanes                     (stride-1 "same" convs, AVX-512 builds)
//   core/conv_winograd.{h,cpp}    WinogradF2x3                     (3x3 pad-1 convs on even maps, AVX-512 builds)
//   core/conv_depthwise.{h,cpp}   Depthwise                        (groups == C)
//
// Dimension letters, used by every core/conv_*.cpp: x (N, C, H, W), W (OC, Cg, KH, KW) with Cg = C / groups and
// OCg = OC / groups, y (N, OC, OH, OW); KK = KH * KW, OHW = OH * OW. The weight of group gi is the (OCg, Cg*KK)
// matrix W[gi*OCg : (gi+1)*OCg] and reads input channels gi*Cg : (gi+1)*Cg.
//
// Threading, shared by the GEMM families: the batch is split into one chunk per thread (batch_chunks), each with its
// own scratch and in backward its own gW partial sum, added up at the end in chunk order; the GEMMs inside run
// single-threaded. With fewer images than threads (inference on one image) the images run one after another and
// gemm splits each GEMM over the threads.
#pragma once

#include <algorithm>
#include <cstdint>

namespace razor {

class SavedTensor;   // core/saved.h: the backward kernels read a compressed x through it

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

// The kernels conv2d can run a pass with (select_algorithm in core/ops/conv2d.h chooses; docs/ops.md "Conv kernels").
enum class ConvAlgorithm {
    Im2col,          // "im2col": im2col tiles of output rows + GEMM (core/conv_im2col.h)
    Im2colBatched,   // "im2col-batched": maps of <= 128 output positions, several images per GEMM
    Gemm1x1,         // "gemm-1x1": 1x1 stride-1 unpadded, the image itself is the GEMM operand (no im2col)
    PaddedPlanes,    // "padded-planes": GEMM over windows of zero-padded planes (core/conv_planes.h)
    WinogradF2x3,    // "winograd-f2x3": Winograd F(2x2, 3x3) (core/conv_winograd.h, core/winograd.h)
    Depthwise,       // "depthwise": groups == C, a direct kernel (core/conv_depthwise.h)
};
inline constexpr ConvAlgorithm kConvAlgorithms[] = {ConvAlgorithm::Im2col,       ConvAlgorithm::Im2colBatched,
                                                    ConvAlgorithm::Gemm1x1,      ConvAlgorithm::PaddedPlanes,
                                                    ConvAlgorithm::WinogradF2x3, ConvAlgorithm::Depthwise};
const char* conv_algorithm_name(ConvAlgorithm algorithm);

namespace detail {

// Output positions o in [lo, hi) whose input index i = o*stride - pad + off (off = k*dilation) lies in [0, in).
inline void valid_range(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t off, int64_t& lo, int64_t& hi) {
    const int64_t a = pad - off;            // i >= 0   <=>  o*stride >= a
    const int64_t c = in - 1 + a;           // i < in   <=>  o*stride <= c
    lo = a <= 0 ? 0 : (a + stride - 1) / stride;
    hi = c < 0 ? 0 : c / stride + 1;
    lo = std::min(lo, out);
    hi = std::clamp(hi, lo, out);
}

// One tap (kh, kw) of the kernel over a whole output map: the output rows [oh_lo, oh_hi) and columns [ow_lo, ow_hi)
// at which it reads inside the image (empty ranges: it sees only padding), at input row oh*sh + ih0 and column
// ow*sw + iw0.
struct ConvTap {
    int64_t kh, kw, oh_lo, oh_hi, ow_lo, ow_hi, ih0, iw0;
};

// f(tap) for the taps in row-major order (kh, then kw): the loop nest of the direct and im2col kernels.
template <class F>
inline void for_each_tap(const ConvGeometry& g, const F& f) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
        ConvTap t{kh, 0, 0, 0, 0, 0, kh * g.dh - g.ph, 0};
        valid_range(g.OH, g.H, g.sh, g.ph, kh * g.dh, t.oh_lo, t.oh_hi);
        for (int64_t kw = 0; kw < g.KW; ++kw) {
            t.kw = kw;
            t.iw0 = kw * g.dw - g.pw;
            valid_range(g.OW, g.W, g.sw, g.pw, kw * g.dw, t.ow_lo, t.ow_hi);
            f(static_cast<const ConvTap&>(t));
        }
    }
}

// Batch chunks: one per thread when there are enough images, else one (and gemm splits each GEMM over the threads).
int64_t batch_chunks(int64_t N);

// gW is computed transposed by the GEMM families, gW_gi^T (Cg*KK, OCg) = col_gi (Cg*KK, T) . gy_gi^T (T, OCg): the
// GEMM then packs gy (OCg x T) for its transposed operand instead of col (Cg*KK x T, KK times larger; that packing
// was 4 % of a resnet20 step), and each element is the same dot product over T in the same order. Here
// gw (OC, Cg*KK) = the sum of the chunks' partials (groups, Cg*KK, OCg) at parts + c * stride, in chunk order.
void gw_from_transposed(const ConvGeometry& g, const float* parts, int64_t stride, int64_t chunks, float* gw);

}  // namespace detail
}  // namespace razor
