// core/ops/unary.cpp -- element-wise math: neg, exp, log, sqrt, pow (scalar exponent), tanh, sigmoid.
//
// reference: torch.neg / exp / log / sqrt / pow(Tensor, Scalar) / tanh / sigmoid. docs: docs/ops.md.
//
// Every op here maps a tensor of any shape to one of the same shape; all arguments below are x, y, g: (...)
// with equal shapes, contiguous float32. Backward formulas are exact.
//
// Saves (only when x requires grad; nothing otherwise):
//   neg      nothing (gx = -g).
//   exp      the output y as PointwiseOperand (gx = g y: y is the cheapest thing that gives the derivative).
//   log      the input x as PointwiseOperand (gx = g / x).
//   sqrt     the output y as PointwiseOperand (gx = g / (2 y)).
//   pow      the input x as PointwiseOperand (gx = g p x^(p-1)); nothing for p == 0 (gx = 0) or p == 1 (gx = g).
//   tanh     the output y as PointwiseOperand (gx = g (1 - y^2)).
//   sigmoid  the output y as PointwiseOperand (gx = g y (1 - y)).
//   Saving the output ties it to the tape: an in-place write into y before backward is reported (version check).
//
// Domain: log and sqrt of negative numbers give NaN, of 0 give -inf / 0 with an infinite gradient; pow with a
// fractional exponent of a negative number gives NaN. All as PyTorch.
#include "core/ops/unary.h"

#include <cmath>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

constexpr int64_t kParallelGrain = 1 << 15;   // below this many elements a loop runs on one thread

// The contiguous f32 tensor an op works on; user errors name the op.
Tensor checked_input(const Tensor& x, const char* op) {
    if (!x.defined()) throw Error(fmt(op, ": got an undefined tensor; hint: pass a tensor that has been created"));
    if (x.dtype() != DType::F32)
        throw Error(fmt(op, ": expected an f32 tensor, got ", dtype_name(x.dtype()), " ", shape_str(x.shape()),
                        "; hint: element-wise math takes f32 (i64 and u8 are for labels, indices and raw bytes)"));
    return x.contiguous();
}

// y[i] = f(x[i])            x, y: (...)
template <class F>
Tensor map(const Tensor& x, F f) {
    Tensor y = Tensor::empty(x.shape());
    const float* px = x.f32();
    float* py = y.f32();
    const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) py[i] = f(px[i]);
    return y;
}

// gx[i] = f(g[i], s[i])     g: (...) upstream gradient, s: (...) the saved tensor, gx: (...)
template <class F>
Tensor map_grad(const Tensor& g_in, const Tensor& s_in, F f) {
    const Tensor g = g_in.contiguous(), s = s_in.contiguous();
    RAZOR_CHECK(g.shape() == s.shape()) << "gradient " << shape_str(g.shape()) << " vs saved " << shape_str(s.shape());
    Tensor gx = Tensor::empty(g.shape());
    const float* pg = g.f32();
    const float* ps = s.f32();
    float* o = gx.f32();
    const int64_t n = g.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = f(pg[i], ps[i]);
    return gx;
}

// ---- backward nodes: one input, so backward only runs when x needs a gradient ----

// y = -x:  gx = -g                                   (...) -- exact
struct NegBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        return {map(g.contiguous(), [](float v) { return -v; })};
    }
};

// y = e^x:  gx = g * dy/dx = g * y                   (...) -- exact
struct ExpBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        return {map_grad(g, ctx.unpack("y"), [](float gv, float y) { return gv * y; })};
    }
};

// y = ln x:  gx = g / x                              (...) -- exact
struct LogBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        return {map_grad(g, ctx.unpack("x"), [](float gv, float x) { return gv / x; })};
    }
};

// y = sqrt(x):  gx = g / (2 sqrt(x)) = g / (2 y)      (...) -- exact
struct SqrtBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        return {map_grad(g, ctx.unpack("y"), [](float gv, float y) { return gv / (2.f * y); })};
    }
};

// y = x^p:  gx = g p x^(p-1)                         (...) -- exact
// p == 0: gx = 0 and p == 1: gx = g, both without a save (PyTorch also returns 0 for p == 0, even at x = 0).
struct PowBackward final : Node {
    float p = 1.f;
    std::vector<Tensor> backward(const Tensor& g) override {
        if (p == 0.f) return {Tensor::zeros(g.shape())};
        if (p == 1.f) return {g};
        if (p == 2.f) return {map_grad(g, ctx.unpack("x"), [](float gv, float x) { return gv * 2.f * x; })};
        const float q = p - 1.f;
        return {map_grad(g, ctx.unpack("x"), [p = p, q](float gv, float x) { return gv * p * std::pow(x, q); })};
    }
};

// y = tanh x:  gx = g (1 - tanh^2 x) = g (1 - y^2)    (...) -- exact
struct TanhBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        return {map_grad(g, ctx.unpack("y"), [](float gv, float y) { return gv * (1.f - y * y); })};
    }
};

// y = 1 / (1 + e^-x):  gx = g y (1 - y)               (...) -- exact
struct SigmoidBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        return {map_grad(g, ctx.unpack("y"), [](float gv, float y) { return gv * y * (1.f - y); })};
    }
};

}  // namespace

Tensor neg(const Tensor& x_in) {
    const Tensor x = checked_input(x_in, "neg");
    Tensor y = map(x, [](float v) { return -v; });
    record<NegBackward>("neg", {x}, y);
    return y;
}

Tensor exp(const Tensor& x_in) {
    const Tensor x = checked_input(x_in, "exp");
    Tensor y = map(x, [](float v) { return exp_kernel(v); });
    if (auto node = record<ExpBackward>("exp", {x}, y)) node->ctx.save("y", y, SaveRole::PointwiseOperand);
    return y;
}

Tensor log(const Tensor& x_in) {
    const Tensor x = checked_input(x_in, "log");
    Tensor y = map(x, [](float v) { return std::log(v); });
    if (auto node = record<LogBackward>("log", {x}, y)) node->ctx.save("x", x, SaveRole::PointwiseOperand);
    return y;
}

Tensor sqrt(const Tensor& x_in) {
    const Tensor x = checked_input(x_in, "sqrt");
    Tensor y = map(x, [](float v) { return std::sqrt(v); });
    if (auto node = record<SqrtBackward>("sqrt", {x}, y)) node->ctx.save("y", y, SaveRole::PointwiseOperand);
    return y;
}

Tensor pow(const Tensor& x_in, float p) {
    const Tensor x = checked_input(x_in, "pow");
    Tensor y;
    if (p == 1.f) y = map(x, [](float v) { return v; });
    else if (p == 2.f) y = map(x, [](float v) { return v * v; });
    else if (p == 3.f) y = map(x, [](float v) { return v * v * v; });
    else if (p == 0.5f) y = map(x, [](float v) { return std::sqrt(v); });
    else if (p == -1.f) y = map(x, [](float v) { return 1.f / v; });
    else y = map(x, [p](float v) { return std::pow(v, p); });
    if (auto node = record<PowBackward>("pow", {x}, y)) {
        node->p = p;
        if (p != 0.f && p != 1.f) node->ctx.save("x", x, SaveRole::PointwiseOperand);
    }
    return y;
}

Tensor tanh(const Tensor& x_in) {
    const Tensor x = checked_input(x_in, "tanh");
    // libm tanh: a formula through e^2x loses relative accuracy near 0 (1 - 2/(e^2x + 1) cancels).
    Tensor y = map(x, [](float v) { return std::tanh(v); });
    if (auto node = record<TanhBackward>("tanh", {x}, y)) node->ctx.save("y", y, SaveRole::PointwiseOperand);
    return y;
}

Tensor sigmoid(const Tensor& x_in) {
    const Tensor x = checked_input(x_in, "sigmoid");
    // 1 / (1 + e^-x) is stable both ways: e^-x -> inf gives 0, e^-x -> 0 gives 1.
    Tensor y = map(x, [](float v) { return 1.f / (1.f + exp_kernel(-v)); });
    if (auto node = record<SigmoidBackward>("sigmoid", {x}, y)) node->ctx.save("y", y, SaveRole::PointwiseOperand);
    return y;
}

}  // namespace razor
