// core/ops/cross_entropy.cpp -- mean cross-entropy with optional label smoothing, fused log_softmax + nll.
//
// reference: torch.nn.functional.cross_entropy(logits (N, C), target (N) int64, reduction='mean',
//            label_smoothing=eps). docs: docs/back-razor.md §5.3 (the loss keeps the probabilities, dense).
//
// With lse_i = log sum_c e^(x_ic) and the smoothed target q_ic = (1 - eps) 1[c = t_i] + eps / C:
//   loss = 1/N sum_i sum_c -q_ic log p_ic = 1/N sum_i [ (1 - eps)(lse_i - x_i,t_i) + eps (lse_i - mean_c x_ic) ]
// lse is computed stably (row max subtracted). Unlike PyTorch there is no ignore_index: a negative target is an
// error, not "ignored".
//
// Saves (only when logits require grad):
//   the softmax probabilities P (N, C) as SaveRole::LossOperand: gx = (P - q) / N needs them, and they cost the
//     same as the logits while sparing backward the exponentials;
//   the targets (N) as SaveRole::Indices (kept exact), to rebuild q.
#include "core/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/check.h"
#include "core/ops/unary.h"   // exp_kernel

namespace razor {
namespace {

constexpr int64_t kParallelGrain = 1 << 14;   // logits elements below which the kernels stay on one thread

// Returns the mean loss; writes the probabilities to `probs` when it is not null.
// x: (N, C) logits, t: (N) targets in [0, C), probs: (N, C) or null
double cross_entropy_forward(const float* x, const int64_t* t, float* probs, int64_t N, int64_t C, float eps) {
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (N * C > kParallelGrain)
    for (int64_t i = 0; i < N; ++i) {
        const float* xr = x + i * C;   // (C)
        float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
        for (int64_t c = 0; c < C; ++c) m = std::max(m, xr[c]);
        float s = 0.f, sum_x = 0.f;
        if (probs) {
            float* pr = probs + i * C;   // (C)
#pragma omp simd reduction(+ : s)
            for (int64_t c = 0; c < C; ++c) {
                pr[c] = exp_kernel(xr[c] - m);
                s += pr[c];
            }
            const float inv = 1.f / s;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) pr[c] *= inv;
        } else {
#pragma omp simd reduction(+ : s)
            for (int64_t c = 0; c < C; ++c) s += exp_kernel(xr[c] - m);
        }
        // lse - x = (m - x) + ln s: adding ln s to m first would round it to the ulp of m
        const double ls = std::log(s);
        double row = (1.0 - eps) * ((static_cast<double>(m) - xr[t[i]]) + ls);
        if (eps > 0.f) {
#pragma omp simd reduction(+ : sum_x)
            for (int64_t c = 0; c < C; ++c) sum_x += xr[c] - m;   // sum of (x - m), so m cancels exactly
            row += eps * (ls - static_cast<double>(sum_x) / C);
        }
        total += row;
    }
    return total / N;
}

// loss = 1/N sum_i sum_c -q_ic log p_ic with log p_ic = x_ic - lse_i, and d lse_i / d x_ic = p_ic, so
// d loss / d x_ic = (p_ic sum_c' q_ic' - q_ic) / N = (p_ic - q_ic) / N          (sum_c q_ic = 1)
// gx = g (P - q) / N,  q_ic = (1 - eps) 1[c = t_i] + eps / C                     g: () upstream -- exact
// p: (N, C) saved probabilities, t: (N), gx: (N, C)
void cross_entropy_backward(float g, const float* p, const int64_t* t, float* gx, int64_t N, int64_t C, float eps) {
    const float scale = g / static_cast<float>(N);
    const float off = eps / static_cast<float>(C);   // the smoothing part of q, same in every column
    const float hit = 1.f - eps;                     // the one-hot part of q, at column t_i
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t i = 0; i < N; ++i) {
        const float* pr = p + i * C;
        float* gr = gx + i * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) gr[c] = scale * (pr[c] - off);
        gr[t[i]] -= scale * hit;
    }
}

struct CrossEntropyBackward final : Node {
    float eps = 0.f;
    std::vector<Tensor> backward(const Tensor& g) override {
        const Tensor p = ctx.unpack("probs").contiguous();
        const Tensor t = ctx.unpack("target").contiguous();
        RAZOR_CHECK(g.numel() == 1) << "cross_entropy backward: upstream gradient " << shape_str(g.shape());
        const int64_t N = p.size(0), C = p.size(1);
        Tensor gx = Tensor::empty(p.shape());
        cross_entropy_backward(g.item(), p.f32(), t.i64(), gx.f32(), N, C, eps);
        return {gx};
    }
};

void check_inputs(const Tensor& logits, const Tensor& target, float eps) {
    if (!logits.defined() || !target.defined())
        throw Error("cross_entropy: got an undefined tensor; hint: pass logits (N, C) and target (N)");
    if (logits.dtype() != DType::F32 || logits.dim() != 2)
        throw Error(fmt("cross_entropy: expected logits (N, C) of f32, got ", dtype_name(logits.dtype()), " ",
                        shape_str(logits.shape()), "; hint: flatten extra dimensions into N (reshape to (-1, C))"));
    const int64_t N = logits.size(0), C = logits.size(1);
    if (N == 0 || C == 0)
        throw Error(fmt("cross_entropy: expected at least one row and one class, got logits ", shape_str(logits.shape()),
                        "; hint: the mean over an empty batch is undefined"));
    if (target.dtype() != DType::I64)
        throw Error(fmt("cross_entropy: expected target (", N, ") of i64 class indices, got ", dtype_name(target.dtype()),
                        " ", shape_str(target.shape()), "; hint: targets are class indices, not one-hot or probabilities"));
    if (target.dim() != 1 || target.size(0) != N)
        throw Error(fmt("cross_entropy: expected target (", N, ") for logits ", shape_str(logits.shape()), ", got ",
                        shape_str(target.shape()), "; hint: one class index per row of logits"));
    if (!(eps >= 0.f && eps < 1.f))
        throw Error(fmt("cross_entropy: label_smoothing must be in [0, 1), got ", eps, "; hint: typical values are 0 or 0.1"));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target_in, float label_smoothing) {
    check_inputs(logits_in, target_in, label_smoothing);
    const Tensor x = logits_in.contiguous();
    const Tensor t = target_in.contiguous();
    const int64_t N = x.size(0), C = x.size(1);
    const int64_t* pt = t.i64();
    for (int64_t i = 0; i < N; ++i)
        if (pt[i] < 0 || pt[i] >= C)
            throw Error(fmt("cross_entropy: target ", pt[i], " at row ", i, " is out of range for ", C,
                            " classes; hint: targets must be in [0, ", C - 1,
                            "]; check the labels or the model's number of classes"));

    Tensor loss = Tensor::empty({});
    auto node = record<CrossEntropyBackward>("cross_entropy", {x}, loss);
    Tensor probs = node ? Tensor::empty({N, C}) : Tensor();   // (N, C)
    loss.f32()[0] = static_cast<float>(
        cross_entropy_forward(x.f32(), pt, node ? probs.f32() : nullptr, N, C, label_smoothing));
    if (node) {
        node->eps = label_smoothing;
        node->ctx.save("probs", probs, SaveRole::LossOperand);
        node->ctx.save("target", t, SaveRole::Indices);
    }
    return loss;
}

}  // namespace razor
