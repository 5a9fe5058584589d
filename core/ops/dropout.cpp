// core/ops/dropout.cpp -- inverted dropout.
//
// reference: torch.nn.functional.dropout (inverted: kept elements are scaled by 1 / (1 - p) in training, so
// evaluation is the identity). docs: docs/back-razor.md §5.1, §6.
//
// Mask: one seed s = gen.next_u64() per call; element i is kept when counter_uniform(s, i) >= p, which happens
// with probability 1 - p (up to the 2^-24 grid of the uniform). The draw of element i depends only on (s, i),
// so the mask is the same on any number of threads.
//
// Saves (only when x requires grad): the keep mask m as 1 bit per element (save_mask, role Mask): n/8 bytes (rounded up
// to whole 64-bit words) instead of a 4n-byte float mask. Nothing else: the scale is a number on the node.
// p == 1 saves nothing (the gradient is 0 everywhere); eval mode and p == 0 record no node at all.
#include "core/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

constexpr int64_t kParallelGrain = 1 << 15;   // elements below which a loop stays on one thread

// x, y: (...) n elements; mask: n bits. Per 64-element word: draw, pack the bits, write y.
void dropout_forward(const float* x, float* y, BitMask& mask, uint64_t seed, float p, float scale, int64_t n) {
    uint64_t* words = mask.words();
    const int64_t num_words = mask.num_words();
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t w = 0; w < num_words; ++w) {
        const int64_t begin = w * 64, end = std::min<int64_t>(begin + 64, n);
        uint64_t word = 0;
        for (int64_t i = begin; i < end; ++i) {
            const bool keep = counter_uniform(seed, static_cast<uint64_t>(i)) >= p;
            word |= uint64_t{keep} << (i - begin);
            y[i] = keep ? x[i] * scale : 0.f;
        }
        words[w] = word;
    }
}

// y = x m / (1 - p):  gx = g * dy/dx = g m / (1 - p)        g, gx: (...), mask: n bits -- exact
struct DropoutBackward final : Node {
    float scale = 1.f;   // 1 / (1 - p); 0 when p == 1 (then no mask is saved)
    std::vector<Tensor> backward(const Tensor& g_in) override {
        if (scale == 0.f) return {Tensor::zeros(g_in.shape())};
        const Tensor g = g_in.contiguous();
        const BitMask& mask = ctx.mask("mask");
        Tensor gx = Tensor::empty(g.shape());
        const float* pg = g.f32();
        float* o = gx.f32();
        const uint64_t* words = mask.words();
        const int64_t n = g.numel(), num_words = mask.num_words();
        RAZOR_CHECK_EQ(mask.size(), n) << "dropout backward";
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
        for (int64_t w = 0; w < num_words; ++w) {
            const uint64_t word = words[w];
            const int64_t begin = w * 64, end = std::min<int64_t>(begin + 64, n);
            for (int64_t i = begin; i < end; ++i) o[i] = (word >> (i - begin)) & 1u ? pg[i] * scale : 0.f;
        }
        return {gx};
    }
};

}  // namespace

Tensor dropout(const Tensor& x_in, float p, bool training, Generator& gen) {
    if (!(p >= 0.f && p <= 1.f))
        throw Error(fmt("dropout: probability p must be in [0, 1], got ", p,
                        "; hint: p is the fraction of elements zeroed (0.1 drops 10%)"));
    if (!x_in.defined()) throw Error("dropout: got an undefined tensor; hint: pass a tensor that has been created");
    if (x_in.dtype() != DType::F32)
        throw Error(fmt("dropout: expected an f32 tensor, got ", dtype_name(x_in.dtype()), " ", shape_str(x_in.shape()),
                        "; hint: dropout applies to f32 activations"));
    if (!training || p == 0.f) return x_in;

    const Tensor x = x_in.contiguous();
    const int64_t n = x.numel();
    if (p == 1.f) {   // everything dropped: zeros, gradient zeros; no randomness needed
        Tensor y = Tensor::zeros(x.shape());
        if (auto node = record<DropoutBackward>("dropout", {x}, y)) node->scale = 0.f;
        return y;
    }
    const uint64_t seed = gen.next_u64();
    const float scale = 1.f / (1.f - p);
    Tensor y = Tensor::empty(x.shape());
    BitMask mask(n);
    dropout_forward(x.f32(), y.f32(), mask, seed, p, scale, n);
    if (auto node = record<DropoutBackward>("dropout", {x}, y)) {
        node->scale = scale;
        node->ctx.save_mask("mask", std::move(mask), y.shape());
    }
    return y;
}

}  // namespace razor
