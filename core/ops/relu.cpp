// core/ops/relu.cpp -- y = max(x, 0), the residual block's y = max(a + b, 0) as one op, and relu6.
//
// reference: torch.nn.functional.relu (add_relu: torch.relu(a + b)), torch.nn.functional.relu6. docs:
// docs/back-razor.md (ReLU keeps 1 bit, not the tensor), docs/ops.md "Fused ops".
//
// Saves: a 1-bit mask (y > 0; relu6: 0 < y < 6) as SaveRole::Mask: n/8 bytes instead of PyTorch's 4n (it saves the
//        result, or for relu6 the input). That is all backward needs, and it leaves the next op free to save its own
//        (possibly razored) input, so no dense copy of the activation stays on the tape. add_relu saves the same
//        mask and nothing else.
// Non-smooth points: at x == 0 (and relu6's x == 6) the gradient is 0, as PyTorch's; a NaN input gives 0 (the
// comparisons are false).
// One pass writes y and the mask words together (AVX-512: one compare gives 16 mask bits and the store mask).
#include "core/ops/relu.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

// y = max(a + b, 0) (b null: max(a, 0)) and words = the bits of y > 0, 64 elements per word. kSix: y = min(max(a, 0),
// 6) and the bits of 0 < a < 6.
template <bool kSix = false>
void relu_pass(const float* a, const float* b, float* y, uint64_t* words, int64_t n) {
    const int64_t num_words = (n + 63) / 64;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
    for (int64_t w = 0; w < num_words; ++w) {
        const int64_t begin = w * 64, end = std::min<int64_t>(begin + 64, n);
        uint64_t word = 0;
#if defined(__AVX512F__)
        for (int64_t i = begin, q = 0; i < end; i += 16, ++q) {
            const __mmask16 lanes = static_cast<__mmask16>(end - i >= 16 ? 0xffffu : (1u << (end - i)) - 1u);
            __m512 s = _mm512_maskz_loadu_ps(lanes, a + i);
            if (b) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(lanes, b + i));
            __mmask16 pos = _mm512_mask_cmp_ps_mask(lanes, s, _mm512_setzero_ps(), _CMP_GT_OQ);
            if constexpr (kSix) {
                const __m512 six = _mm512_set1_ps(6.f);
                _mm512_mask_storeu_ps(y + i, lanes, _mm512_maskz_mov_ps(pos, _mm512_min_ps(s, six)));
                pos = _mm512_mask_cmp_ps_mask(pos, s, six, _CMP_LT_OQ);
            } else {
                _mm512_mask_storeu_ps(y + i, lanes, _mm512_maskz_mov_ps(pos, s));
            }
            word |= static_cast<uint64_t>(pos) << (16 * q);
        }
#else
        for (int64_t i = begin; i < end; ++i) {
            const float s = b ? a[i] + b[i] : a[i];
            if constexpr (kSix) {
                y[i] = s > 0.f ? (s < 6.f ? s : 6.f) : 0.f;
                word |= uint64_t{s > 0.f && s < 6.f} << (i - begin);
            } else {
                y[i] = s > 0.f ? s : 0.f;
                word |= uint64_t{s > 0.f} << (i - begin);
            }
        }
#endif
        words[w] = word;
    }
}

// gx = g * 1[y > 0]            (N...) -- exact; add_relu returns the same gx for a and for b; relu6: g * 1[0 < x < 6]
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
#if defined(__AVX512F__)
            for (int64_t i = begin, q = 0; i < end; i += 16, ++q) {
                const __mmask16 lanes = static_cast<__mmask16>(end - i >= 16 ? 0xffffu : (1u << (end - i)) - 1u);
                const __mmask16 keep = static_cast<__mmask16>(word >> (16 * q)) & lanes;
                _mm512_mask_storeu_ps(o + i, lanes, _mm512_maskz_loadu_ps(keep, pg + i));
            }
#else
            for (int64_t i = begin; i < end; ++i) o[i] = (word >> (i - begin)) & 1u ? pg[i] : 0.f;
#endif
        }
        return std::vector<Tensor>(num_inputs(), gx);
    }
};

Tensor relu_impl(const char* op, const Tensor& a_in, const Tensor* b_in) {
    if (a_in.dtype() != DType::F32) throw Error(fmt(op, ": expected an f32 tensor, got ", dtype_name(a_in.dtype())));
    Tensor a = a_in.contiguous(), b;
    if (b_in) {
        if (b_in->dtype() != DType::F32)
            throw Error(fmt(op, ": expected an f32 tensor b, got ", dtype_name(b_in->dtype())));
        if (b_in->shape() != a.shape())
            throw Error(fmt(op, ": expected a and b of one shape, got ", shape_str(a.shape()), " and ",
                            shape_str(b_in->shape()), "; hint: for broadcasting use relu(add(a, b))"));
        b = b_in->contiguous();
    }
    Tensor y = Tensor::empty(a.shape());
    const int64_t n = a.numel();
    BitMask mask(n);
    relu_pass(a.f32(), b_in ? b.f32() : nullptr, y.f32(), mask.words(), n);
    std::vector<Tensor> inputs = {a};
    if (b_in) inputs.push_back(b);
    if (auto node = record<ReluBackward>(op, inputs, y)) node->ctx.save_mask("mask", std::move(mask), y.shape());
    return y;
}
}  // namespace

Tensor relu(const Tensor& x) { return relu_impl("relu", x, nullptr); }

Tensor relu6(const Tensor& x_in) {
    if (x_in.dtype() != DType::F32) throw Error(fmt("relu6: expected an f32 tensor, got ", dtype_name(x_in.dtype())));
    const Tensor x = x_in.contiguous();
    Tensor y = Tensor::empty(x.shape());
    BitMask mask(x.numel());
    relu_pass<true>(x.f32(), nullptr, y.f32(), mask.words(), x.numel());
    if (auto node = record<ReluBackward>("relu6", {x}, y)) node->ctx.save_mask("mask", std::move(mask), y.shape());
    return y;
}

Tensor add_relu(const Tensor& a, const Tensor& b) { return relu_impl("add_relu", a, &b); }

}  // namespace razor
