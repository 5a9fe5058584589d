// core/ops/relu.cpp -- y = max(x, 0), the residual block's y = max(a + b, 0) as one op (also for two channel subsets
// added onto their union: add_relu_channels), and relu6.
//
// reference: torch.nn.functional.relu (add_relu: torch.relu(a + b)), torch.nn.functional.relu6. docs:
// docs/back-razor.md (ReLU keeps 1 bit, not the tensor), docs/ops.md "Fused ops".
//
// Saves: a 1-bit mask (y > 0; relu6: 0 < y < 6) as SaveRole::Mask: n/8 bytes instead of PyTorch's 4n (it saves the
//        result, or for relu6 the input). That is all backward needs, and it leaves the next op free to save its own
//        (possibly razored) input, so no dense copy of the activation stays on the tape. add_relu and
//        add_relu_channels save the same mask and nothing else.
// Non-smooth points: at x == 0 (and relu6's x == 6) the gradient is 0, as PyTorch's; a NaN input gives 0 (the
// comparisons are false).
// One pass writes y and the mask words together (AVX-512: one compare gives 16 mask bits and the store mask).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 masked loads pass _mm512_undefined_*() through, which -Wmaybe-uninitialized reports once they
// are inlined into add_relu_channels (a known false positive; sparse/masker.cpp has the same).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "core/ops/relu.h"

#include "core/anomaly.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <utility>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

// y[0, len) = max(a + b, 0) (b null: max(a, 0); both null: 0) and the bits of y > 0, len <= 64, as one word's worth.
// kSix: y = min(max(a, 0), 6) and the bits of 0 < a < 6 (b unused).
template <bool kSix = false>
inline __attribute__((always_inline)) uint64_t relu_segment(const float* a, const float* b, float* y, int64_t len) {
    if (!a && !b) {
        std::fill_n(y, len, 0.f);
        return 0;
    }
    if (!a) std::swap(a, b);
    uint64_t word = 0;
#if defined(__AVX512F__)
    for (int64_t i = 0, q = 0; i < len; i += 16, ++q) {
        const __mmask16 lanes = static_cast<__mmask16>(len - i >= 16 ? 0xffffu : (1u << (len - i)) - 1u);
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
    for (int64_t i = 0; i < len; ++i) {
        const float s = b ? a[i] + b[i] : a[i];
        if constexpr (kSix) {
            y[i] = s > 0.f ? (s < 6.f ? s : 6.f) : 0.f;
            word |= uint64_t{s > 0.f && s < 6.f} << i;
        } else {
            y[i] = s > 0.f ? s : 0.f;
            word |= uint64_t{s > 0.f} << i;
        }
    }
#endif
    return word;
}

// y = max(a + b, 0) (b null: max(a, 0)) and words = the bits of y > 0, 64 elements per word (kSix: relu6).
template <bool kSix = false>
void relu_pass(const float* a, const float* b, float* y, uint64_t* words, int64_t n) {
    const int64_t num_words = (n + 63) / 64;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
    for (int64_t w = 0; w < num_words; ++w) {
        const int64_t begin = w * 64, len = std::min<int64_t>(64, n - begin);
        words[w] = relu_segment<kSix>(a + begin, b ? b + begin : nullptr, y + begin, len);
    }
}

// o = g * 1[bit set], n elements, the bits 64 to a word.
void masked_copy(const float* pg, const uint64_t* words, float* o, int64_t n) {
    const int64_t num_words = (n + 63) / 64;
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
}

// gx = g * 1[y > 0]            (N...) -- exact; add_relu returns the same gx for a and for b; relu6: g * 1[0 < x < 6]
// Handed g and its sole owner, gx is written over it (masked_copy reads each element before writing it).
struct ReluBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g_in) override { return run(g_in, false); }
    std::vector<Tensor> backward_consuming(Tensor&& g_in) override { return run(g_in, may_write_over(g_in)); }

private:
    std::vector<Tensor> run(const Tensor& g_in, bool overwrite) {
        const BitMask& mask = ctx.mask("mask");
        Tensor g = g_in.contiguous();
        Tensor gx = overwrite ? g : Tensor::empty(g.shape());
        masked_copy(g.f32(), mask.words(), gx.f32(), g.numel());
        return std::vector<Tensor>(num_inputs(), gx);
    }
};

// overwrite_a: y may take a_in's storage (the caller gave a_in up and it is its storage's sole owner).
Tensor relu_impl(const char* op, const Tensor& a_in, const Tensor* b_in, bool overwrite_a = false) {
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
    // Element i is read before it is written, so y may be a itself.
    Tensor y = overwrite_a ? a.detach() : Tensor::empty(a.shape());
    const int64_t n = a.numel();
    BitMask mask(n);
    relu_pass(a.f32(), b_in ? b.f32() : nullptr, y.f32(), mask.words(), n);
    if (overwrite_a) y.bump_version();
    std::vector<Tensor> inputs = {a};
    if (b_in) inputs.push_back(b);
    if (auto node = record<ReluBackward>(op, inputs, y)) node->ctx.save_mask("mask", std::move(mask), y.shape());
    return y;
}
}  // namespace

Tensor relu(const Tensor& x) { return relu_impl("relu", x, nullptr); }

namespace {
// overwrite_x: y takes x's storage (relu_pass reads each element before writing it; only the mask is saved).
Tensor relu6_impl(const Tensor& x_in, bool overwrite_x) {
    if (x_in.dtype() != DType::F32) throw Error(fmt("relu6: expected an f32 tensor, got ", dtype_name(x_in.dtype())));
    const Tensor x = x_in.contiguous();
    Tensor y = overwrite_x ? x.detach() : Tensor::empty(x.shape());
    BitMask mask(x.numel());
    relu_pass<true>(x.f32(), nullptr, y.f32(), mask.words(), x.numel());
    if (overwrite_x) y.bump_version();
    if (auto node = record<ReluBackward>("relu6", {x}, y)) node->ctx.save_mask("mask", std::move(mask), y.shape());
    return y;
}
}  // namespace

Tensor relu6(const Tensor& x) { return relu6_impl(x, false); }

Tensor relu6(Tensor&& x) {
    return relu6_impl(x, may_write_over(x));
}

Tensor add_relu(const Tensor& a, const Tensor& b) { return relu_impl("add_relu", a, &b); }

Tensor add_relu(Tensor&& a, const Tensor& b) {
    const bool overwrite = may_write_over(a) && !a.same_storage(b);
    return relu_impl("add_relu", a, &b, overwrite);
}

namespace {
// Channel placements: a (N, Ca, S...) lands on the output channels `at` (Ca distinct entries below `channels`).
void check_placement(const Tensor& t, const char* name, const std::vector<int64_t>& at, int64_t channels) {
    if (t.dtype() != DType::F32)
        throw Error(fmt("add_relu_channels: expected an f32 tensor ", name, ", got ", dtype_name(t.dtype())));
    if (t.dim() < 2 || t.size(1) != static_cast<int64_t>(at.size()))
        throw Error(fmt("add_relu_channels: expected ", name, " of shape (N, ", at.size(), ", ...) for its ", at.size(),
                        " channel positions, got ", shape_str(t.shape()),
                        "; hint: pass one output channel per channel of ", name));
    std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(channels, 0)));
    for (int64_t c : at) {
        if (c < 0 || c >= channels || seen[static_cast<size_t>(c)])
            throw Error(fmt("add_relu_channels: ", name, "'s channel position ", c, " is out of [0, ", channels,
                            ") or repeated; hint: positions are distinct output channels"));
        seen[static_cast<size_t>(c)] = true;
    }
}

// g (N, C, S) masked by 1[y > 0], then gathered onto each input's channels (the whole tensor when an input covers
// every channel in order).
struct AddReluChannelsBackward final : Node {
    std::vector<int64_t> a_at, b_at;
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const BitMask& mask = ctx.mask("mask");
        const Tensor g = g_in.contiguous();
        Tensor gm = Tensor::empty(g.shape());
        const int64_t n = g.numel();
        masked_copy(g.f32(), mask.words(), gm.f32(), n);
        const float* o = gm.f32();
        const int64_t N = g.size(0), C = g.size(1), S = N * C != 0 ? n / (N * C) : 0;
        auto gather = [&](const std::vector<int64_t>& at) {
            bool identity = static_cast<int64_t>(at.size()) == C;
            for (size_t i = 0; identity && i < at.size(); ++i) identity = at[i] == static_cast<int64_t>(i);
            if (identity) return gm;
            Shape s = g.shape();
            s[1] = static_cast<int64_t>(at.size());
            Tensor out = Tensor::empty(s);
            const int64_t K = static_cast<int64_t>(at.size());
#pragma omp parallel for schedule(static) if (N * K * S > (1 << 15))
            for (int64_t p = 0; p < N * K; ++p)
                std::copy_n(o + ((p / K) * C + at[static_cast<size_t>(p % K)]) * S, S, out.f32() + p * S);
            return out;
        };
        return {gather(a_at), gather(b_at)};
    }
};
}  // namespace

Tensor add_relu_channels(const Tensor& a_in, const std::vector<int64_t>& a_at, const Tensor& b_in,
                         const std::vector<int64_t>& b_at, int64_t channels) {
    check_placement(a_in, "a", a_at, channels);
    check_placement(b_in, "b", b_at, channels);
    const Tensor a = a_in.contiguous(), b = b_in.contiguous();
    Shape ys = a.shape(), bs = b.shape();
    ys[1] = channels;
    bs[1] = channels;
    if (bs != ys)
        throw Error(fmt("add_relu_channels: a ", shape_str(a.shape()), " and b ", shape_str(b.shape()),
                        " differ outside dim 1; hint: both must be (N, channels, ...) of one batch and size"));
    // src[c]: the plane of output channel c inside a (or b), -1 when that input does not hold channel c
    std::vector<int64_t> src_a(static_cast<size_t>(channels), -1), src_b(static_cast<size_t>(channels), -1);
    for (size_t i = 0; i < a_at.size(); ++i) src_a[static_cast<size_t>(a_at[i])] = static_cast<int64_t>(i);
    for (size_t i = 0; i < b_at.size(); ++i) src_b[static_cast<size_t>(b_at[i])] = static_cast<int64_t>(i);
    Tensor y = Tensor::empty(ys);
    const int64_t n = y.numel(), N = ys[0], Ca = a.size(1), Cb = b.size(1);
    const int64_t S = N * channels != 0 ? n / (N * channels) : 0;   // elements per (image, channel) plane
    BitMask mask(n);
    const float *pa = a.f32(), *pb = b.f32();
    float* py = y.f32();
    uint64_t* words = mask.words();
    // The planes (image, channel) of input a (or b) behind output plane p, null when that input lacks the channel.
    auto source = [&](int64_t plane, const std::vector<int64_t>& src, const float* x, int64_t C) -> const float* {
        const int64_t i = src[static_cast<size_t>(plane % channels)];
        return i >= 0 ? x + ((plane / channels) * C + i) * S : nullptr;
    };
    if (S % 64 == 0) {   // whole words per plane (every CIFAR stream): one lookup per plane
        const int64_t planes = N * channels, per_plane = S / 64;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
        for (int64_t p = 0; p < planes; ++p) {
            const float *sa = source(p, src_a, pa, Ca), *sb = source(p, src_b, pb, Cb);
            for (int64_t k = 0; k < per_plane; ++k)
                words[p * per_plane + k] = relu_segment(sa ? sa + 64 * k : nullptr, sb ? sb + 64 * k : nullptr,
                                                        py + p * S + 64 * k, 64);
        }
    } else {   // a word may span planes: cut at plane ends
#pragma omp parallel for schedule(static) if (n > (1 << 15))
        for (int64_t w = 0; w < mask.num_words(); ++w) {
            const int64_t begin = w * 64, end = std::min<int64_t>(begin + 64, n);
            uint64_t word = 0;
            for (int64_t i = begin; i < end;) {
                const int64_t plane = i / S, off = i % S, stop = std::min(end, (plane + 1) * S);
                const float *sa = source(plane, src_a, pa, Ca), *sb = source(plane, src_b, pb, Cb);
                word |= relu_segment(sa ? sa + off : nullptr, sb ? sb + off : nullptr, py + i, stop - i) << (i - begin);
                i = stop;
            }
            words[w] = word;
        }
    }
    if (auto node = record<AddReluChannelsBackward>("add_relu_channels", {a, b}, y)) {
        node->a_at = a_at;
        node->b_at = b_at;
        node->ctx.save_mask("mask", std::move(mask), y.shape());
    }
    return y;
}

}  // namespace razor
