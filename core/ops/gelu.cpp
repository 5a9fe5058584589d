// core/ops/gelu.cpp -- y = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), the exact GELU.
//
// reference: torch.nn.functional.gelu with approximate='none' (PyTorch's default). docs: docs/back-razor.md §5.1, §6.
//
// Phi is evaluated through erfc (see normal_cdf) with no libm call, so the loops vectorise. Accuracy: within 2e-6
// relative of the double formula for |x| <= 5 and 2e-5 out to |x| = 10 (test_gelu.cpp); in the negative tail it
// is more accurate than PyTorch's float 1 + erf(x / sqrt 2), which loses all precision below x = -5 (0 at -5.8).
//
// Saves: the input x as SaveRole::GeluInput, only when x requires grad. Backward needs the pre-activation at
//        every position (Phi(x) + x phi(x) is not recoverable from y), so it keeps x itself: 4 bytes per element
//        under the dense policy. (The Back Razor reference keeps it dense in fp16 and never prunes it; a policy
//        decides that, not this op.) gelu(Tensor&&) writes y over an x the caller gives up when the save is a
//        code or a copy of x, not x itself.
#include "core/ops/gelu.h"

#include <cmath>

#include "core/anomaly.h"
#include "core/autograd.h"
#include "core/check.h"
#include "core/ops/unary.h"   // exp_kernel

namespace razor {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr int64_t kParallelGrain = 1 << 15;   // elements below which a loop stays on one thread

// Phi(x), the standard normal CDF, = 0.5 erfc(-x / sqrt 2), without a libm call so that loops vectorise.
// erfc(z) for z >= 0 by the Chebyshev fit of Numerical Recipes (2nd ed., §6.2): erfc(z) = t e^(-z^2 + P(t)),
// t = 1 / (1 + z / 2), fractional error < 1.2e-7 for every z >= 0. Working with erfc(|x| / sqrt 2) keeps the
// negative tail (Phi -> 0) accurate relative to its size; 1 - 0.5 erfc gives the positive side.
inline float normal_cdf(float x) {
    const float z = std::abs(x) * kInvSqrt2;
    const float t = 1.f / (1.f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    const float half_erfc = 0.5f * t * exp_kernel(p - z * z);
    return x >= 0.f ? 1.f - half_erfc : half_erfc;
}

// y[i] = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))               x, y: (...)
void gelu_forward(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]);
}

// dy/dx = Phi(x) + x phi(x),  phi(x) = e^(-x^2/2) / sqrt(2 pi)
inline float gelu_derivative(float v) { return normal_cdf(v) + v * (kInvSqrt2Pi * exp_kernel(-0.5f * v * v)); }
float gelu_derivative_fn(float v) { return gelu_derivative(v); }   // addressable, for multiply_by_codebook

// gx = g (Phi(x) + x phi(x))                                   g, x, gx: (...) -- exact
void gelu_backward(const float* g, const float* x, float* gx, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) gx[i] = g[i] * gelu_derivative(x[i]);
}

// Handed g and its sole owner (Node::backward_consuming), gx is written over it: both paths are elementwise, each
// element of g read before its own gx is written. The MLP's (B, N, 4D) hidden gradient then costs one buffer in
// backward, not two (vit_b_16 at batch 16: 37 MiB less at the backward's peak).
struct GeluBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g_in) override { return run(g_in, false); }
    std::vector<Tensor> backward_consuming(Tensor&& g_in) override { return run(g_in, may_write_over(g_in)); }

private:
    std::vector<Tensor> run(const Tensor& g_in, bool overwrite) {
        const Tensor g = g_in.contiguous();
        const SavedTensor& saved = ctx.saved("x");
        RAZOR_CHECK(g.shape() == saved.shape())
            << "gelu backward: " << shape_str(g.shape()) << " vs " << shape_str(saved.shape());
        Tensor gx = overwrite ? g : Tensor::empty(g.shape());
        // A coded form (Back Razor's 4-bit GELU code) multiplies by its 16 derivative values directly.
        if (saved.multiply_by_codebook(gelu_derivative_fn, g.f32(), gx.f32())) return {gx};
        const Tensor x = ctx.unpack("x").contiguous();
        gelu_backward(g.f32(), x.f32(), gx.f32(), x.numel());
        return {gx};
    }
};

}  // namespace

namespace {
void check_input(const Tensor& x) {
    if (!x.defined()) throw Error("gelu: got an undefined tensor; hint: pass a tensor that has been created");
    if (x.dtype() != DType::F32)
        throw Error(fmt("gelu: expected an f32 tensor, got ", dtype_name(x.dtype()), " ", shape_str(x.shape()),
                        "; hint: activations are f32"));
}
}  // namespace

Tensor gelu(const Tensor& x_in) {
    check_input(x_in);
    const Tensor x = x_in.contiguous();
    Tensor y = Tensor::empty(x.shape());
    gelu_forward(x.f32(), y.f32(), x.numel());
    if (auto node = record<GeluBackward>("gelu", {x}, y)) node->ctx.save("x", x, SaveRole::GeluInput);
    return y;
}

// The save comes first and decides. A policy that keeps x itself (the dense tape) holds x's storage, and y takes a
// buffer of its own; one that keeps a code or a copy (Back Razor's 4-bit derivative code, fp16) needs x's values no
// more once it has saved, and y is written over them: the MLP's (B, N, 4D) hidden layer then costs one buffer, not
// two. record() links the node to a throwaway alias of x, and y is made the node's output once it exists.
Tensor gelu(Tensor&& x_in) {
    check_input(x_in);
    if (!may_write_over(x_in)) return gelu(static_cast<const Tensor&>(x_in));
    const Tensor x = std::move(x_in);
    const auto node = record<GeluBackward>("gelu", {x}, x.detach());
    if (node) node->ctx.save("x", x, SaveRole::GeluInput);
    const bool saved_as_itself = x.storage().use_count() > 1;
    Tensor y = saved_as_itself ? Tensor::empty(x.shape()) : x.detach();
    gelu_forward(x.f32(), y.f32(), x.numel());   // elementwise: in place is safe
    if (!saved_as_itself) y.bump_version();
    if (node) y.set_grad_fn(node);
    return y;
}

}  // namespace razor
