// core/ops/softmax.cpp -- softmax and log_softmax along any dimension, numerically stable.
//
// reference: torch.softmax / torch.log_softmax. docs: docs/back-razor.md §6 (softmax backward on the saved P).
//
// Layout: x (...) is viewed as (O, D, I): O = product of the dims before `dim`, D = size(dim), I = product of the
// dims after it. Element (o, d, i) sits at o*D*I + d*I + i. I == 1 (dim is the last one) is the fast path: each
// row of D is contiguous and the OpenMP loop runs over the O rows. Otherwise the work is split into blocks of
// up to kBlock columns i, and the loops over a block vectorise along i.
// Stability: the row max is subtracted before exponentiating, so no e^x overflows; a row of -inf (all masked)
// gives NaN, as in PyTorch.
//
// Saves (only when x requires grad):
//   softmax      the output P as SaveRole::InputGradOperand: gx = P (g - sum_d g P) needs P, not x.
//   log_softmax  the output L = log P as SaveRole::LossOperand: gx = g - e^L sum_d g.
// softmax(Tensor&&) writes P over the scores the caller gives up (attention's S = Q K^T: one (B, h, N, N) buffer,
// not two).
#include "core/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/check.h"
#include "core/anomaly.h"
#include "core/ops/unary.h"   // exp_kernel
#include "core/runtime.h"    // num_threads

namespace razor {
namespace {

constexpr int64_t kParallelGrain = 1 << 14;   // elements below which a call stays on one thread
constexpr int64_t kBlock = 64;                // columns i per task when dim is not the last one

struct Layout {
    int64_t outer = 1, dim = 1, inner = 1;   // (O, D, I)
    int64_t numel() const { return outer * dim * inner; }
};

Layout layout_of(const Tensor& x, int64_t dim, const char* op) {
    if (!x.defined()) throw Error(fmt(op, ": got an undefined tensor; hint: pass a tensor that has been created"));
    if (x.dtype() != DType::F32)
        throw Error(fmt(op, ": expected an f32 tensor, got ", dtype_name(x.dtype()), " ", shape_str(x.shape()),
                        "; hint: ", op, " takes f32 scores"));
    Layout l;
    if (x.dim() == 0) {   // a scalar: PyTorch accepts dim 0 or -1 and treats it as one row of one element
        if (dim != 0 && dim != -1)
            throw Error(fmt(op, ": dimension ", dim, " is out of range for a 0-d tensor; hint: use dim 0 or -1"));
        return l;
    }
    const int64_t d = wrap_dim(dim, x.dim(), op);
    for (int64_t k = 0; k < d; ++k) l.outer *= x.shape()[k];
    l.dim = x.shape()[d];
    for (int64_t k = d + 1; k < x.dim(); ++k) l.inner *= x.shape()[k];
    return l;
}

// ---- forward ----
// x, y: (O, D, I). y = softmax(x) or log_softmax(x) along D.
//   m = max_d x,  s = sum_d e^(x - m),  softmax = e^(x - m) / s,  log_softmax = x - m - ln s.

// I == 1: one contiguous row of D per o.
void forward_rows(const float* x, float* y, const Layout& l, bool log) {
    const int64_t D = l.dim;
#pragma omp parallel for schedule(static) if (l.numel() > kParallelGrain)
    for (int64_t o = 0; o < l.outer; ++o) {
        const float* xr = x + o * D;   // (D)
        float* yr = y + o * D;         // (D)
        float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
        for (int64_t d = 0; d < D; ++d) m = std::max(m, xr[d]);
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t d = 0; d < D; ++d) {
            const float e = exp_kernel(xr[d] - m);
            yr[d] = e;
            s += e;
        }
        if (log) {   // (x - m) - ln s, not x - (m + ln s): m + ln s would round to the ulp of m
            const float ls = std::log(s);
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - m) - ls;
        } else {
            const float inv = 1.f / s;
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) yr[d] *= inv;
        }
    }
}

// I > 1: tasks of (o, block of up to kBlock columns i); the reductions over d keep one accumulator per column.
void forward_strided(const float* x, float* y, const Layout& l, bool log) {
    const int64_t D = l.dim, I = l.inner;
    const int64_t blocks = (I + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (l.numel() > kParallelGrain)
    for (int64_t task = 0; task < l.outer * blocks; ++task) {
        const int64_t o = task / blocks, i0 = (task % blocks) * kBlock, w = std::min(kBlock, I - i0);
        const float* xb = x + o * D * I + i0;   // column block: element (d, i) at xb[d * I + i], i < w
        float* yb = y + o * D * I + i0;
        float m[kBlock], s[kBlock];             // per column: max, then sum of exponentials
        std::fill(m, m + w, -std::numeric_limits<float>::infinity());
        std::fill(s, s + w, 0.f);
        for (int64_t d = 0; d < D; ++d)
#pragma omp simd
            for (int64_t i = 0; i < w; ++i) m[i] = std::max(m[i], xb[d * I + i]);
        for (int64_t d = 0; d < D; ++d)
#pragma omp simd
            for (int64_t i = 0; i < w; ++i) {
                const float e = exp_kernel(xb[d * I + i] - m[i]);
                yb[d * I + i] = e;
                s[i] += e;
            }
        if (log) {
            for (int64_t i = 0; i < w; ++i) s[i] = std::log(s[i]);
            for (int64_t d = 0; d < D; ++d)
#pragma omp simd
                for (int64_t i = 0; i < w; ++i) yb[d * I + i] = (xb[d * I + i] - m[i]) - s[i];
        } else {
            for (int64_t i = 0; i < w; ++i) s[i] = 1.f / s[i];
            for (int64_t d = 0; d < D; ++d)
#pragma omp simd
                for (int64_t i = 0; i < w; ++i) yb[d * I + i] *= s[i];
        }
    }
}

// ---- backward ----
// g, y, gx: (O, D, I); y is the saved output.
//   softmax:     P = y.  dP_d/dx_k = P_d (1[d = k] - P_k), so
//                gx_k = sum_d g_d P_d (1[d = k] - P_k) = P_k (g_k - sum_d g_d P_d)              -- exact
//   log_softmax: L = y.  dL_d/dx_k = 1[d = k] - P_k with P = e^L, so
//                gx_k = g_k - e^(L_k) sum_d g_d                                                 -- exact

void backward_rows(const float* g, const float* y, float* gx, const Layout& l, bool log) {
    const int64_t D = l.dim;
#pragma omp parallel for schedule(static) if (l.numel() > kParallelGrain)
    for (int64_t o = 0; o < l.outer; ++o) {
        const float* gr = g + o * D;   // (D)
        const float* yr = y + o * D;   // (D)
        float* out = gx + o * D;       // (D)
        float dot = 0.f;
        if (log) {
#pragma omp simd reduction(+ : dot)
            for (int64_t d = 0; d < D; ++d) dot += gr[d];
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) out[d] = gr[d] - exp_kernel(yr[d]) * dot;
        } else {
#pragma omp simd reduction(+ : dot)
            for (int64_t d = 0; d < D; ++d) dot += gr[d] * yr[d];
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) out[d] = yr[d] * (gr[d] - dot);
        }
    }
}

void backward_strided(const float* g, const float* y, float* gx, const Layout& l, bool log) {
    const int64_t D = l.dim, I = l.inner;
    const int64_t blocks = (I + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (l.numel() > kParallelGrain)
    for (int64_t task = 0; task < l.outer * blocks; ++task) {
        const int64_t o = task / blocks, i0 = (task % blocks) * kBlock, w = std::min(kBlock, I - i0);
        const int64_t base = o * D * I + i0;   // element (d, i) of the block at base + d * I + i
        const float *gb = g + base, *yb = y + base;
        float* ob = gx + base;
        float dot[kBlock];                     // per column: sum_d g P (softmax) or sum_d g (log_softmax)
        std::fill(dot, dot + w, 0.f);
        for (int64_t d = 0; d < D; ++d)
#pragma omp simd
            for (int64_t i = 0; i < w; ++i) dot[i] += log ? gb[d * I + i] : gb[d * I + i] * yb[d * I + i];
        for (int64_t d = 0; d < D; ++d)
#pragma omp simd
            for (int64_t i = 0; i < w; ++i) {
                const float gv = gb[d * I + i], yv = yb[d * I + i];
                ob[d * I + i] = log ? gv - exp_kernel(yv) * dot[i] : yv * (gv - dot[i]);
            }
    }
}

// Handed g and its sole owner (Node::backward_consuming), gx is written over it: every kernel finishes a row's (or
// column block's) dot product before it writes that row, and then reads each g element before writing its gx.
// Attention's (B, h, N, N) gradient then costs one buffer, not two (vit_b_16 at batch 16: 28 MiB).
struct SoftmaxBackward final : Node {
    Layout l;
    bool log = false;
    std::vector<Tensor> backward(const Tensor& g_in) override { return run(g_in, false); }
    std::vector<Tensor> backward_consuming(Tensor&& g_in) override { return run(g_in, may_write_over(g_in)); }

private:
    std::vector<Tensor> run(const Tensor& g_in, bool overwrite) {
        const Tensor g = g_in.contiguous();
        const SavedTensor& saved = ctx.saved("y");
        if (l.inner == 1 && saved.has_row_unpack() && saved.shape().size() >= 2 && l.outer % saved.shape()[0] == 0)
            return {backward_by_sample(g, saved, overwrite)};
        const Tensor y = ctx.unpack("y").contiguous();
        RAZOR_CHECK(g.shape() == y.shape()) << op() << " backward: " << shape_str(g.shape()) << " vs " << shape_str(y.shape());
        Tensor gx = overwrite ? g : Tensor::empty(y.shape());
        if (l.inner == 1) backward_rows(g.f32(), y.f32(), gx.f32(), l, log);
        else backward_strided(g.f32(), y.f32(), gx.f32(), l, log);
        return {gx};
    }

    // P saved in a form that expands one sample at a time (attention's P as dense int8): each thread expands one
    // sample's rows into a small scratch and runs the same row kernel on them, so the backward holds g, gx and
    // two samples of P, not a third (B, h, N, N) buffer (vit_b_16 at batch 16: 3.7 MB, not 29.8 MB).
    Tensor backward_by_sample(const Tensor& g, const SavedTensor& saved, bool overwrite) const {
        RAZOR_CHECK(g.shape() == saved.shape()) << op() << " backward: " << shape_str(g.shape()) << " vs " << shape_str(saved.shape());
        Tensor gx = overwrite ? g : Tensor::empty(saved.shape());
        const int64_t samples = saved.shape()[0], rows = l.outer / samples, per_sample = rows * l.dim;
        const int64_t chunks = std::min<int64_t>(samples, num_threads());
        Tensor scratch = Tensor::empty({chunks, per_sample});   // one sample of P per chunk
        const Layout one{rows, l.dim, 1};
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
        for (int64_t c = 0; c < chunks; ++c) {
            float* y = scratch.f32() + c * per_sample;
            for (int64_t n = samples * c / chunks; n < samples * (c + 1) / chunks; ++n) {
                saved.unpack_rows(n, 1, y);
                backward_rows(g.f32() + n * per_sample, y, gx.f32() + n * per_sample, one, log);
            }
        }
        return gx;
    }
};

// overwrite_x: y is written over x's values in its storage (softmax(Tensor&&)). Each element of x is read before
// its own y is written and never after (the forward's second pass reads x[d] and writes y[d]; the third reads only
// y), so the kernels run in place unchanged. log_softmax's third pass reads x again: it never overwrites.
Tensor softmax_impl(const Tensor& x_in, int64_t dim, bool log, bool overwrite_x = false) {
    const char* op = log ? "log_softmax" : "softmax";
    const Layout l = layout_of(x_in, dim, op);
    const Tensor x = x_in.contiguous();
    Tensor y = overwrite_x ? x.detach() : Tensor::empty(x.shape());
    if (overwrite_x) y.bump_version();
    if (l.numel() > 0) {
        if (l.inner == 1) forward_rows(x.f32(), y.f32(), l, log);
        else forward_strided(x.f32(), y.f32(), l, log);
    }
    if (auto node = record<SoftmaxBackward>(op, {x}, y)) {
        node->l = l;
        node->log = log;
        node->ctx.save("y", y, log ? SaveRole::LossOperand : SaveRole::InputGradOperand);
    }
    return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false); }

// Nothing saves x (softmax's backward needs only P), so once the caller has given x up its buffer can hold P.
Tensor softmax(Tensor&& x, int64_t dim) {
    const bool overwrite = may_write_over(x);
    return softmax_impl(x, dim, false, overwrite);
}
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true); }

}  // namespace razor
