// core/ops/pool.cpp -- 2-D max, average and adaptive average pooling.
//
// reference: torch.nn.functional.max_pool2d / avg_pool2d (count_include_pad=True) / adaptive_avg_pool2d, with
// dilation 1 and ceil_mode=False. docs: docs/back-razor.md §5.3.
//
// Dimension letters: x (N, C, H, W) or (C, H, W) is viewed as P = N*C independent (H, W) planes; the output is
// (P, OH, OW). Every kernel runs OpenMP over planes, so a backward scatter never races.
// Windows: output (oh, ow) covers input rows oh*sh - ph ... + kh - 1 and columns alike; positions outside the
// input are padding (-inf for max, 0 for avg).
//
// Saves:
//   max_pool2d           the argmax position inside each window (0 .. kh*kw-1, row-major in the window) as
//                        SaveRole::Indices: U8 when kh*kw <= 256 (1 byte per output, not the input), else I64.
//                        Exactly what the scatter in backward needs; ties go to the first maximum, a NaN wins
//                        (as PyTorch).
//   avg_pool2d           nothing (the gradient is g / (kh*kw) spread over each window).
//   adaptive_avg_pool2d  nothing (the gradient is g / window size spread over each window).
#include "core/ops/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

constexpr int64_t kParallelWork = 1 << 14;

// The validated geometry of one pooling call.
struct Geometry {
    int64_t P = 0, H = 0, W = 0, OH = 0, OW = 0;   // planes, input and output plane size
    int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
    Shape out_shape;                               // leading dims of x + (OH, OW)
};

std::string pair_str(const std::array<int64_t, 2>& v) { return fmt("(", v[0], ", ", v[1], ")"); }

// Checks x: f32, (N, C, H, W) or (C, H, W), non-empty planes. Fills P, H, W.
void check_input(const Tensor& x, const char* op, Geometry& g) {
    if (!x.defined()) throw Error(fmt(op, ": x is undefined"));
    if (x.dtype() != DType::F32) throw Error(fmt(op, ": expected x f32, got ", dtype_name(x.dtype())));
    if (x.dim() != 3 && x.dim() != 4)
        throw Error(fmt(op, ": expected x (N, C, H, W) or (C, H, W), got ", shape_str(x.shape()),
                        "; hint: pooling is 2-D; reshape (N, C*H*W) features back to images first"));
    g.H = x.size(-2), g.W = x.size(-1);
    if (g.H == 0 || g.W == 0)
        throw Error(fmt(op, ": expected non-empty planes, got x ", shape_str(x.shape()),
                        "; hint: the input image became empty in an earlier layer"));
    g.P = x.numel() / (g.H * g.W);
}

Geometry window_geometry(const Tensor& x, const Pool2dOptions& o, const char* op) {
    Geometry g;
    check_input(x, op, g);
    const std::array<int64_t, 2> stride = {o.stride[0] ? o.stride[0] : o.kernel[0],
                                           o.stride[1] ? o.stride[1] : o.kernel[1]};
    if (o.kernel[0] <= 0 || o.kernel[1] <= 0)
        throw Error(fmt(op, ": expected a positive kernel, got ", pair_str(o.kernel),
                        "; hint: kernel {2, 2} halves the image"));
    if (stride[0] < 0 || stride[1] < 0)
        throw Error(fmt(op, ": expected a positive stride (or 0 = kernel), got ", pair_str(o.stride)));
    if (o.padding[0] < 0 || o.padding[1] < 0 || 2 * o.padding[0] > o.kernel[0] || 2 * o.padding[1] > o.kernel[1])
        throw Error(fmt(op, ": expected padding between 0 and half the kernel ", pair_str(o.kernel), ", got ",
                        pair_str(o.padding), "; hint: a larger padding makes windows of padding only"));
    if (g.H + 2 * o.padding[0] < o.kernel[0] || g.W + 2 * o.padding[1] < o.kernel[1])
        throw Error(fmt(op, ": kernel ", pair_str(o.kernel), " is larger than the padded input (", g.H + 2 * o.padding[0],
                        ", ", g.W + 2 * o.padding[1], ") of x ", shape_str(x.shape()),
                        "; hint: use a smaller kernel, or adaptive_avg_pool2d for a fixed output size"));
    g.kh = o.kernel[0], g.kw = o.kernel[1], g.sh = stride[0], g.sw = stride[1], g.ph = o.padding[0], g.pw = o.padding[1];
    g.OH = (g.H + 2 * g.ph - g.kh) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw - g.kw) / g.sw + 1;
    g.out_shape = x.shape();
    g.out_shape[x.dim() - 2] = g.OH, g.out_shape[x.dim() - 1] = g.OW;
    return g;
}

// Start and end (exclusive) of adaptive window i of `out` over `in`: [floor(i in / out), ceil((i+1) in / out)).
inline int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
inline int64_t adaptive_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

// ---------------------------------------------------------------- max_pool2d

// The maximum of window (oh, ow) of plane xp (H, W) and its position in the window (row-major); ties go to the first
// maximum, a NaN wins (as PyTorch), and a window of -inf reports its first real position.
inline float max_window(const float* xp, const Geometry& g, int64_t oh, int64_t ow, int64_t& best_at) {
    const int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    const int64_t i0 = std::max<int64_t>(h0, 0), i1 = std::min(h0 + g.kh, g.H);
    const int64_t j0 = std::max<int64_t>(w0, 0), j1 = std::min(w0 + g.kw, g.W);
    float best = -std::numeric_limits<float>::infinity();
    best_at = (i0 - h0) * g.kw + (j0 - w0);
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) {
            const float v = xp[i * g.W + j];
            if (v > best || std::isnan(v)) {
                best = v;
                best_at = (i - h0) * g.kw + (j - w0);
            }
        }
    return best;
}

#if defined(__AVX512F__)
// The common case, kernel 2x2, stride 2, no padding (every CIFAR VGG pool), 16 outputs per step. With the input
// rows r0, r1 of output row oh and columns 2 ow, 2 ow + 1 de-interleaved into even and odd lanes, the window's four
// values in max_window's order are e0 = r0 even, e1 = r0 odd, e2 = r1 even, e3 = r1 odd; best = e0, then
// best = e_t wherever e_t > best: the same first-maximum-wins result and index as max_window. A chunk that holds a
// NaN is redone by max_window (a NaN wins there). Returns false when the geometry is not this case.
bool max_pool_2x2_forward(const float* x, float* y, uint8_t* idx, const Geometry& g) {
    if (g.kh != 2 || g.kw != 2 || g.sh != 2 || g.sw != 2 || g.ph != 0 || g.pw != 0) return false;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
#pragma omp parallel for schedule(static) if (g.P * g.OH * g.OW * 4 > kParallelWork)
    for (int64_t p = 0; p < g.P; ++p)
        for (int64_t oh = 0; oh < g.OH; ++oh) {
            const float* r0 = x + (p * g.H + 2 * oh) * g.W;
            const float* r1 = r0 + g.W;
            const int64_t o_row = (p * g.OH + oh) * g.OW;
            for (int64_t ow = 0; ow < g.OW; ow += 16) {
                const int n = static_cast<int>(std::min<int64_t>(16, g.OW - ow));
                const __mmask16 out = static_cast<__mmask16>((1u << n) - 1u);
                const __mmask16 lo = static_cast<__mmask16>((1u << std::min(2 * n, 16)) - 1u);
                const __mmask16 hi = static_cast<__mmask16>((1u << std::max(2 * n - 16, 0)) - 1u);
                const __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * ow), a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * ow + 16);
                const __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * ow), b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * ow + 16);
                const __m512 e[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                                     _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)};
                __mmask16 nan = 0;
                for (const __m512& v : e) nan |= _mm512_mask_cmp_ps_mask(out, v, v, _CMP_UNORD_Q);
                if (nan) {   // rare
                    for (int64_t i = ow; i < ow + n; ++i) {
                        int64_t at;
                        y[o_row + i] = max_window(x + p * g.H * g.W, g, oh, i, at);
                        if (idx) idx[o_row + i] = static_cast<uint8_t>(at);
                    }
                    continue;
                }
                __m512 best = e[0];
                __m512i at = _mm512_setzero_si512();
                for (int t = 1; t < 4; ++t) {
                    const __mmask16 gt = _mm512_cmp_ps_mask(e[t], best, _CMP_GT_OQ);
                    best = _mm512_mask_mov_ps(best, gt, e[t]);
                    at = _mm512_mask_mov_epi32(at, gt, _mm512_set1_epi32(t));
                }
                _mm512_mask_storeu_ps(y + o_row + ow, out, best);
                if (idx) _mm512_mask_cvtepi32_storeu_epi8(idx + o_row + ow, out, at);
            }
        }
    return true;
}
#endif

// Forward for one index type T (uint8_t or int64_t). idx may be null (no gradient needed).
template <class T>
void max_pool_forward(const float* x /*(P, H, W)*/, float* y /*(P, OH, OW)*/, T* idx /*(P, OH, OW) or null*/,
                      const Geometry& g) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, uint8_t>)
        if (max_pool_2x2_forward(x, y, idx, g)) return;
#endif
#pragma omp parallel for schedule(static) if (g.P * g.OH * g.OW * g.kh * g.kw > kParallelWork)
    for (int64_t p = 0; p < g.P; ++p) {
        const float* xp = x + p * g.H * g.W;   // (H, W)
        for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t o = (p * g.OH + oh) * g.OW + ow;
                int64_t best_at;
                y[o] = max_window(xp, g, oh, ow, best_at);
                if (idx) idx[o] = static_cast<T>(best_at);
            }
    }
}

// gx[argmax of window o] += g[o]        (P, H, W) -- exact (almost everywhere: away from ties)
template <class T>
void max_pool_backward(const float* gy /*(P, OH, OW)*/, const T* idx /*(P, OH, OW)*/, float* gx /*(P, H, W)*/,
                       const Geometry& g) {
#pragma omp parallel for schedule(static) if (g.P * g.H * g.W > kParallelWork)
    for (int64_t p = 0; p < g.P; ++p) {
        float* gp = gx + p * g.H * g.W;   // (H, W)
        for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t o = (p * g.OH + oh) * g.OW + ow;
                const int64_t at = static_cast<int64_t>(idx[o]);
                const int64_t i = oh * g.sh - g.ph + at / g.kw, j = ow * g.sw - g.pw + at % g.kw;
                gp[i * g.W + j] += gy[o];
            }
    }
}

struct MaxPool2dBackward final : Node {
    Geometry geo;
    std::vector<Tensor> backward(const Tensor& g_in) override {
        Tensor g = g_in.contiguous();                 // (P, OH, OW)
        Tensor idx = ctx.unpack("argmax");            // (P, OH, OW), U8 or I64
        Tensor gx = Tensor::zeros(edges()[0].shape);  // (P, H, W)
        if (idx.dtype() == DType::U8)
            max_pool_backward(g.f32(), idx.data<uint8_t>(), gx.f32(), geo);
        else
            max_pool_backward(g.f32(), idx.data<int64_t>(), gx.f32(), geo);
        return {gx};
    }
};

// ---------------------------------------------------------------- avg_pool2d

struct AvgPool2dBackward final : Node {
    Geometry geo;
    // y[o] = Σ_window x / (kh kw)  =>  gx[i, j] = Σ_{windows o containing (i, j)} g[o] / (kh kw)
    //                                                                      (P, H, W) -- exact
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Geometry& g = geo;
        Tensor gy = g_in.contiguous();                // (P, OH, OW)
        Tensor gx = Tensor::zeros(edges()[0].shape);  // (P, H, W)
        const float* pg = gy.f32();
        float* px = gx.f32();
        const float inv = 1.f / static_cast<float>(g.kh * g.kw);
#pragma omp parallel for schedule(static) if (g.P * g.OH * g.OW * g.kh * g.kw > kParallelWork)
        for (int64_t p = 0; p < g.P; ++p) {
            float* gp = px + p * g.H * g.W;   // (H, W)
            for (int64_t oh = 0; oh < g.OH; ++oh) {
                const int64_t h0 = oh * g.sh - g.ph;
                const int64_t i0 = std::max<int64_t>(h0, 0), i1 = std::min(h0 + g.kh, g.H);
                for (int64_t ow = 0; ow < g.OW; ++ow) {
                    const int64_t w0 = ow * g.sw - g.pw;
                    const int64_t j0 = std::max<int64_t>(w0, 0), j1 = std::min(w0 + g.kw, g.W);
                    const float v = pg[(p * g.OH + oh) * g.OW + ow] * inv;
                    for (int64_t i = i0; i < i1; ++i)
                        for (int64_t j = j0; j < j1; ++j) gp[i * g.W + j] += v;
                }
            }
        }
        return {gx};
    }
};

// ---------------------------------------------------------------- adaptive_avg_pool2d

struct AdaptiveAvgPool2dBackward final : Node {
    Geometry geo;
    // y[oh, ow] = mean over rows [hs, he) x cols [ws, we)  =>  gx[i, j] = Σ_{windows containing (i, j)} g / area
    //                                                                      (P, H, W) -- exact
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Geometry& g = geo;
        Tensor gy = g_in.contiguous();                // (P, OH, OW)
        Tensor gx = Tensor::zeros(edges()[0].shape);  // (P, H, W)
        const float* pg = gy.f32();
        float* px = gx.f32();
#pragma omp parallel for schedule(static) if (g.P * g.H * g.W > kParallelWork)
        for (int64_t p = 0; p < g.P; ++p) {
            float* gp = px + p * g.H * g.W;   // (H, W)
            for (int64_t oh = 0; oh < g.OH; ++oh) {
                const int64_t i0 = adaptive_start(oh, g.H, g.OH), i1 = adaptive_end(oh, g.H, g.OH);
                for (int64_t ow = 0; ow < g.OW; ++ow) {
                    const int64_t j0 = adaptive_start(ow, g.W, g.OW), j1 = adaptive_end(ow, g.W, g.OW);
                    const float v = pg[(p * g.OH + oh) * g.OW + ow] / static_cast<float>((i1 - i0) * (j1 - j0));
                    for (int64_t i = i0; i < i1; ++i)
                        for (int64_t j = j0; j < j1; ++j) gp[i * g.W + j] += v;
                }
            }
        }
        return {gx};
    }
};

}  // namespace

Tensor max_pool2d(const Tensor& x_in, const Pool2dOptions& options) {
    const Geometry g = window_geometry(x_in, options, "max_pool2d");
    Tensor x = x_in.contiguous();   // (P, H, W)
    Tensor y = Tensor::empty(g.out_shape);
    const bool track = any_requires_grad({x});
    const bool small = g.kh * g.kw <= 256;   // window positions fit in one byte
    Tensor idx = track ? Tensor::empty(g.out_shape, small ? DType::U8 : DType::I64) : Tensor();
    if (small)
        max_pool_forward<uint8_t>(x.f32(), y.f32(), track ? idx.data<uint8_t>() : nullptr, g);
    else
        max_pool_forward<int64_t>(x.f32(), y.f32(), track ? idx.data<int64_t>() : nullptr, g);
    if (auto node = record<MaxPool2dBackward>("max_pool2d", {x}, y)) {
        node->geo = g;
        node->ctx.save("argmax", idx, SaveRole::Indices);
    }
    return y;
}

Tensor avg_pool2d(const Tensor& x_in, const Pool2dOptions& options) {
    const Geometry g = window_geometry(x_in, options, "avg_pool2d");
    Tensor x = x_in.contiguous();   // (P, H, W)
    Tensor y = Tensor::empty(g.out_shape);
    const float* px = x.f32();
    float* py = y.f32();
    const double inv = 1.0 / static_cast<double>(g.kh * g.kw);   // count_include_pad: padding counts as 0s
#pragma omp parallel for schedule(static) if (g.P * g.OH * g.OW * g.kh * g.kw > kParallelWork)
    for (int64_t p = 0; p < g.P; ++p) {
        const float* xp = px + p * g.H * g.W;   // (H, W)
        for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t h0 = oh * g.sh - g.ph;
            const int64_t i0 = std::max<int64_t>(h0, 0), i1 = std::min(h0 + g.kh, g.H);
            for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t w0 = ow * g.sw - g.pw;
                const int64_t j0 = std::max<int64_t>(w0, 0), j1 = std::min(w0 + g.kw, g.W);
                double acc = 0;
                for (int64_t i = i0; i < i1; ++i)
                    for (int64_t j = j0; j < j1; ++j) acc += xp[i * g.W + j];
                py[(p * g.OH + oh) * g.OW + ow] = static_cast<float>(acc * inv);
            }
        }
    }
    if (auto node = record<AvgPool2dBackward>("avg_pool2d", {x}, y)) node->geo = g;
    return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x_in, std::array<int64_t, 2> output_size) {
    Geometry g;
    check_input(x_in, "adaptive_avg_pool2d", g);
    if (output_size[0] <= 0 || output_size[1] <= 0)
        throw Error(fmt("adaptive_avg_pool2d: expected a positive output_size, got ", pair_str(output_size),
                        "; hint: {1, 1} is global average pooling"));
    g.OH = output_size[0], g.OW = output_size[1];
    g.out_shape = x_in.shape();
    g.out_shape[x_in.dim() - 2] = g.OH, g.out_shape[x_in.dim() - 1] = g.OW;
    Tensor x = x_in.contiguous();   // (P, H, W)
    Tensor y = Tensor::empty(g.out_shape);
    const float* px = x.f32();
    float* py = y.f32();
#pragma omp parallel for schedule(static) if (g.P * g.H * g.W > kParallelWork)
    for (int64_t p = 0; p < g.P; ++p) {
        const float* xp = px + p * g.H * g.W;   // (H, W)
        for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t i0 = adaptive_start(oh, g.H, g.OH), i1 = adaptive_end(oh, g.H, g.OH);
            for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t j0 = adaptive_start(ow, g.W, g.OW), j1 = adaptive_end(ow, g.W, g.OW);
                double acc = 0;
                for (int64_t i = i0; i < i1; ++i)
                    for (int64_t j = j0; j < j1; ++j) acc += xp[i * g.W + j];
                py[(p * g.OH + oh) * g.OW + ow] = static_cast<float>(acc / static_cast<double>((i1 - i0) * (j1 - j0)));
            }
        }
    }
    if (auto node = record<AdaptiveAvgPool2dBackward>("adaptive_avg_pool2d", {x}, y)) node->geo = g;
    return y;
}

}  // namespace razor
