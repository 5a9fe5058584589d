// core/ops/relu.cpp -- y = max(x, 0).
//
// reference: torch.nn.functional.relu. docs: docs/back-razor.md (ReLU keeps 1 bit, not the tensor).
//
// Saves: a 1-bit mask (x > 0) as SaveKind::Mask: n/8 bytes instead of PyTorch's 4n (it saves the result).
//        That is all backward needs, and it leaves the next op free to save its own (possibly razored) input,
//        so no dense copy of the activation stays on the tape.
// Non-smooth point: at x == 0 the gradient is 0 (as PyTorch).
#include "core/ops/relu.h"

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {
// gx = g * 1[x > 0]            (N...) -- exact
struct ReluBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const BitMask& mask = ctx.mask("mask");
        Tensor g = g_in.contiguous();
        Tensor gx = Tensor::empty(g.shape());
        const float* pg = g.f32();
        float* o = gx.f32();
        const uint64_t* words = mask.words();
        const int64_t n = g.numel();
        const int64_t num_words = mask.num_words();
#pragma omp parallel for schedule(static) if (n > (1 << 15))
        for (int64_t w = 0; w < num_words; ++w) {
            const uint64_t word = words[w];
            const int64_t begin = w * 64, end = std::min<int64_t>(begin + 64, n);
            for (int64_t i = begin; i < end; ++i) o[i] = (word >> (i - begin)) & 1u ? pg[i] : 0.f;
        }
        return {gx};
    }
};
}  // namespace

Tensor relu(const Tensor& x_in) {
    if (x_in.dtype() != DType::F32) throw Error(fmt("relu: expected an f32 tensor, got ", dtype_name(x_in.dtype())));
    Tensor x = x_in.contiguous();
    Tensor y = Tensor::empty(x.shape());
    const float* px = x.f32();
    float* py = y.f32();
    const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) py[i] = px[i] > 0.f ? px[i] : 0.f;
    if (auto node = record<ReluBackward>("relu", {x}, y)) node->ctx.save_mask("mask", BitMask::from_positive(px, n), y.shape());
    return y;
}

}  // namespace razor
