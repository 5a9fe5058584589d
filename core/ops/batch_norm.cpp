// core/ops/batch_norm.cpp -- batch normalisation over the channel dimension, optionally fused with the ReLU after it.
//
// reference: torch.nn.functional.batch_norm; batch_norm_relu = torch.relu(F.batch_norm(...)).
// docs: docs/ops.md "batch_norm", docs/back-razor.md §5.4 (BN modes), §6.3 (razored input), docs/bench-ops.md.
//
// Dimension letters: x is viewed as (N, C, S) with S = H*W (or L, or 1 for (N, C) input); M = N*S values per
// channel.
//
// Passes over memory (the unfused BN + ReLU pair needs 2 reads + 2 writes of the activation forward, with the
// (N, C, S) intermediate, and 4 reads + 2 writes backward, with the masked gradient as an intermediate):
//   forward   1. per-channel Σ(x - shift), Σ(x - shift)^2 (one pass; shift = the channel's first value, so no
//               cancellation when |mean| >> std)
//             2. y = relu(x a + b) with a = w rstd, b = bias - mean a, and the 1-bit mask of y > 0, one
//               flat pass (the mask words are written from the block of y just computed, still in cache)
//   backward  1. per-channel Σ gm and Σ gm x_hat with gm = g * mask (mask = all ones without the ReLU)
//             2. gx = w rstd (gm - Σgm/M - x_hat Σ(gm x_hat)/M), written over g when the walk hands g over and
//                nothing else holds it (Node::backward_consuming), so g and gx are never both alive
// Reductions run in parallel over (channel, chunk of whole images) tasks, not only over channels (16 channels on
// 2 threads would balance, but 3 channels on 2 would not, and the tasks also keep each pass's working set small).
// A chunk's length depends on N and S only, and its partial sums (float over <= 256 values, then double) are added
// in chunk order: a channel's statistics do not depend on the thread count nor on which other channels run in the
// same call, so VR-PGE's compact BN on kept channels equals the full BN on those channels bit for bit.
//
// Measured (docs/ops.md "Fused ops", perf record of `razor bench --model resnet20 --batch 128 --threads 2`): the
// fused forward takes 3-5 % of the step against 8.3 % for batch_norm + relu + mask packing; the backward's
// reduction pass took 14 % against 7.2 % for the pair's two backwards while the mask was decoded by a shift per
// value; with one masked 16-lane load per 16 mask bits (the AVX-512 kernel's gm) it takes 3.3-3.8 % and the whole backward
// about 5.5 % (quiet machine).
//
// Saves (batch_norm_relu saves exactly what batch_norm followed by relu saves, so tape accounting is unchanged):
//   training=true   x as SaveRole::BatchNormInput (Back Razor may keep it as fp16, per-channel int8 or razored:
//                   BatchNormSave in sparse/razor_policy.h; backward unpacks it to fp32, except
//                   per-channel int8, whose codes it reads in place: SavedTensor::channel_codes) and per-channel mean and rstd as
//                   SaveRole::Statistics (dense fp32, 2 floats per channel), computed from the true x. Backward
//                   recomputes x_hat = (x - mean) * rstd from them (back-razor.md §6.3), so a razored x works
//                   unchanged. weight by reference (SaveRole::Parameter, 0 bytes) when x needs a gradient.
//                   Only what is needed: x, mean, rstd when x or weight needs a gradient; nothing for bias alone.
//   training=false  y = x*a + c per channel, a = weight * rstd_run. gx = g*a needs no activation: running_var and
//                   weight are held by reference (SaveRole::Parameter, 0 bytes, version-checked) when x needs a
//                   gradient; x (BatchNormInput) and running_mean (reference) only when weight needs a gradient.
//                   So a frozen BN in eval mode saves 0 bytes.
//   with ReLU       plus the 1-bit mask of y > 0 (SaveRole::Mask, M*C/8 bytes), what relu saves (core/ops/relu.cpp),
//                   whenever the node is recorded. It also tells the policy that y = relu(x A_c + B_c) of the x it
//                   saved (SavedContext::note_output, 0 bytes): Back Razor may keep the next conv's copy of y as
//                   that function of x's per-channel int8 codes (sparse/channel_int8.h ChannelAffineReluTensor).
// The running statistics are module buffers held by the model anyway; a training call after an eval forward
// writes them in place, which makes that eval node's backward throw (version check) instead of using new values.
#include "core/ops/batch_norm.h"

#include "core/anomaly.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/autograd.h"
#include "core/batch_norm_kernels.h"
#include "core/bitmask.h"
#include "core/check.h"
#include "core/isa.h"

namespace razor {
namespace {

constexpr int64_t kParallelWork = 1 << 14;   // values per call below which threads cost more than they save
constexpr int64_t kChunkValues = 1 << 12;    // values per (channel, image chunk) reduction task, about
constexpr int64_t kFloatRun = 256;           // float partial sums run over at most this many values
constexpr int64_t kBlock = 1 << 12;          // values per task of the flat output pass (a multiple of 64)

// One (C) vector argument: absent, or f32 of shape (C).
void check_channel_vector(const Tensor& t, const char* what, int64_t C, const Tensor& x) {
    if (!t.defined()) return;
    if (t.dtype() != DType::F32)
        throw Error(fmt("batch_norm: expected ", what, " f32, got ", dtype_name(t.dtype())));
    if (t.dim() != 1 || t.size(0) != C)
        throw Error(fmt("batch_norm: expected ", what, " (", C, ") for x ", shape_str(x.shape()), ", got ",
                        shape_str(t.shape()), "; hint: num_features must equal the channel dimension x.size(1)"));
}

// Element c of a (C) vector that may be a strided view.
inline float& at(const Tensor& v, int64_t c) { return v.f32()[c * v.strides()[0]]; }

// gm = g * 1[y > 0]: the gradient through the fused ReLU (all of g without a mask). Value j's bit is bit j % 64 of
// mask word j / 64. With AVX-512, 16 values at a time come in one masked load (the 16 mask bits are the load's lane
// mask); the scalar loop takes the rest. The unfused BN backward (no mask) runs these very loops with all bits set,
// so batch_norm + relu and batch_norm_relu sum in the same order.
inline float gm_at(const float* g, const uint64_t* mask, int64_t j) {
    return !mask || ((mask[j >> 6] >> (j & 63)) & 1u) ? g[j] : 0.f;
}
// The vector loops: the active family's row kernels (core/batch_norm_kernels.h, one template over 16 or 8 lanes in
// core/batch_norm_rows.h), each followed by the scalar loop on what is left of the run; generic runs only the
// scalar loops. A run's sums therefore depend on the family (lane count), never on threads or other channels.
// row_kernels: the family's two kernels, or null for generic.
const detail::BnRowKernels* row_kernels(Isa isa) {
#if defined(RAZOR_X86_KERNELS)
    static const detail::BnRowKernels avx512 = detail::bn_row_kernels_avx512(), avx2 = detail::bn_row_kernels_avx2();
    if (isa == Isa::Avx512) return &avx512;
    if (isa == Isa::Avx2) return &avx2;
#endif
    (void)isa;
    return nullptr;
}

// x_hat of value j of one channel, from the two stored forms backward reads in place:
//   XhatF32   x kept in fp32 (dense or unpacked):   x_hat = (x - centre) * scale
//   XhatCode  x kept as per-channel 8-bit codes:    x_hat = off + mul * code, off = (lo - centre) * scale,
//             mul = step * scale (SavedTensor::channel_codes; no fp32 copy of x is made)
// row(g, mask) is the same reader for the vector kernels.
struct XhatF32 {
    const float* px;
    float centre, scale;
    float operator()(int64_t j) const { return (px[j] - centre) * scale; }
    detail::BnRow row(const float* g, const uint64_t* mask) const {
        return {.g = g, .mask = mask, .x = px, .codes = nullptr, .xa = centre, .xb = scale};
    }
};
struct XhatCode {
    const uint8_t* codes;
    float off, mul;
    float operator()(int64_t j) const { return off + mul * static_cast<float>(codes[j]); }
    detail::BnRow row(const float* g, const uint64_t* mask) const {
        return {.g = g, .mask = mask, .x = nullptr, .codes = codes, .xa = off, .xb = mul};
    }
};

// Two per-channel sums over the channel's N*S values, (C) each, in double. row(c, base, len, fa, fb) adds the
// float sums of values [base, base + len) of x's flat (N, C, S) layout into fa, fb; it is called on runs of at
// most kFloatRun values of one (n, c) row. See the header comment for the (channel, image chunk) task layout.
template <class Row>
void channel_sums(int64_t N, int64_t C, int64_t S, std::vector<double>& sum_a, std::vector<double>& sum_b,
                  const Row& row) {
    const int64_t per = std::max<int64_t>(1, std::min(N, kChunkValues / std::max<int64_t>(S, 1)));   // images per chunk
    const int64_t K = (N + per - 1) / per;                                                   // chunks per channel
    std::vector<double> partial(static_cast<size_t>(2 * C * K));                             // (C, K, 2)
#pragma omp parallel for schedule(static) if (N * C * S > kParallelWork && C * K > 1)
    for (int64_t t = 0; t < C * K; ++t) {
        const int64_t c = t / K, k = t % K;
        double a = 0, b = 0;
        for (int64_t n = k * per; n < std::min(N, (k + 1) * per); ++n) {
            const int64_t base = (n * C + c) * S;
            for (int64_t s0 = 0; s0 < S; s0 += kFloatRun) {
                float fa = 0.f, fb = 0.f;
                row(c, base + s0, std::min(kFloatRun, S - s0), fa, fb);
                a += fa, b += fb;
            }
        }
        partial[2 * t] = a, partial[2 * t + 1] = b;
    }
    sum_a.assign(static_cast<size_t>(C), 0.0), sum_b.assign(static_cast<size_t>(C), 0.0);
    for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < K; ++k) sum_a[c] += partial[2 * (c * K + k)], sum_b[c] += partial[2 * (c * K + k) + 1];
}

// Forward pass 2, flat over x's (N, C, S) values in word-aligned blocks: y = x a_c + b_c, then relu, then the mask
// words of y > 0 from the block just written.
void write_output(const float* px, float* py, uint64_t* mask, int64_t N, int64_t C, int64_t S,
                  const std::vector<float>& A, const std::vector<float>& B, bool relu) {
    const int64_t n = N * C * S;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t begin = blk * kBlock, end = std::min(n, begin + kBlock);
        for (int64_t i = begin; i < end;) {
            const int64_t r = i / S, row_end = std::min((r + 1) * S, end);
            const float a = A[r % C], b = B[r % C];
            if (relu) {
                for (int64_t j = i; j < row_end; ++j) {
                    const float v = px[j] * a + b;
                    py[j] = v > 0.f ? v : 0.f;
                }
            } else {
                for (int64_t j = i; j < row_end; ++j) py[j] = px[j] * a + b;
            }
            i = row_end;
        }
        if (!mask) continue;
        for (int64_t w = begin / 64; w * 64 < end; ++w) {
            uint64_t word = 0;
            const int64_t w_end = std::min<int64_t>(64, end - w * 64);
            for (int64_t t = 0; t < w_end; ++t) word |= static_cast<uint64_t>(py[w * 64 + t] > 0.f) << t;
            mask[w] = word;
        }
    }
}

// gx, gweight, gbias of batch_norm and batch_norm_relu.
struct BatchNormBackward final : Node {
    int64_t N = 0, C = 0, S = 0;   // x viewed as (N, C, S)
    bool training = true;
    bool relu = false;             // batch_norm_relu: g is first masked by the saved y > 0 bits
    float eps = 1e-5f;

    std::vector<Tensor> backward(const Tensor& g_in) override { return run(g_in, false); }
    // Handed g and its sole owner, gx is written over it: pass 1 has read all of g before pass 2 writes, and pass 2
    // reads each element before it writes the same one.
    std::vector<Tensor> backward_consuming(Tensor&& g_in) override { return run(g_in, may_write_over(g_in)); }

private:
    std::vector<Tensor> run(const Tensor& g_in, bool overwrite_g) {
        Tensor g = g_in.contiguous();   // (N, C, S)
        const bool want_x = needs_grad(0), want_w = needs_grad(1), want_b = needs_grad(2);
        Tensor gx = want_x ? (overwrite_g ? g : Tensor::empty(g.shape())) : Tensor();   // (N, C, S)
        Tensor gw = want_w ? Tensor::empty({C}) : Tensor();                // (C)
        Tensor gb = want_b ? Tensor::empty({C}) : Tensor();                // (C)
        const bool need_xhat = want_x || want_w;
        // Per-channel centre and scale of x_hat = (x - centre_c) * scale_c: batch (mean, rstd) in training,
        // (running_mean, 1/sqrt(running_var + eps)) in eval.
        Tensor x, mean, rstd, running_mean, running_var, weight;
        std::optional<ChannelCodes> codes;   // x as per-channel 8-bit codes, read in place (no unpacked copy)
        const auto take_x = [&] {
            codes = ctx.saved("x").channel_codes();
            if (!codes) x = ctx.unpack("x");
        };
        if (ctx.has("weight")) weight = ctx.unpack("weight");
        if (training) {
            if (need_xhat) take_x(), mean = ctx.unpack("mean"), rstd = ctx.unpack("rstd");
        } else {
            if (want_w) take_x(), running_mean = ctx.unpack("running_mean");
            if (need_xhat) running_var = ctx.unpack("running_var");
        }
        const uint64_t* mask = relu ? ctx.mask("mask").words() : nullptr;
        const detail::BnRowKernels* kernels = row_kernels(active_isa());   // null: scalar loops only
        std::vector<float> w(C, 1.f), centre(C, 0.f), scale(C, 1.f);   // (C) each
        for (int64_t c = 0; c < C; ++c) {
            if (weight.defined()) w[c] = at(weight, c);
            if (!need_xhat) continue;
            if (training) {
                centre[c] = mean.f32()[c], scale[c] = rstd.f32()[c];
            } else {
                scale[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(at(running_var, c)) + eps));
                if (want_w) centre[c] = at(running_mean, c);
            }
        }
        const float* pg = g.f32();
        const float* px = x.defined() ? x.f32() : nullptr;
        // Runs body(xhat) with channel c's x_hat reader: over the codes when x is stored as codes, else over px.
        const auto with_xhat = [&](int64_t c, const auto& body) {
            if (codes) {
                const float lo = codes->qparams[2 * c], step = codes->qparams[2 * c + 1];
                body(XhatCode{codes->codes, (lo - centre[c]) * scale[c], step * scale[c]});
            } else {
                body(XhatF32{px, centre[c], scale[c]});
            }
        };
        // gm = g * 1[y > 0] under the fused ReLU (exact: relu's own backward), else g: gm_at / the kernels' gm.

        // Pass 1, reductions over the channel's M values: sum_g = Σ gm, sum_gxhat = Σ gm * x_hat.
        std::vector<double> sum_g, sum_gxhat;
        const bool need_gxhat = want_w || (want_x && training);
        if (want_b || need_gxhat) {
            channel_sums(N, C, S, sum_g, sum_gxhat, [&](int64_t c, int64_t i0, int64_t len, float& fa, float& fb) {
                with_xhat(c, [&](const auto& xhat) {
                    const int64_t end = i0 + len;
                    float a = 0.f, b = 0.f;
                    int64_t j = kernels ? kernels->sums(xhat.row(pg, mask), i0, end, need_gxhat, a, b) : i0;
                    // std::fma: the compiler may contract v * x_hat + b or not, and may decide differently with and
                    // without the ReLU mask, which would break batch_norm_relu == relu(batch_norm) bit for bit.
                    for (; j < end; ++j) {
                        const float v = gm_at(pg, mask, j);
                        a += v;
                        if (need_gxhat) b = std::fma(v, xhat(j), b);
                    }
                    fa += a, fb += b;
                });
            });
        }
        // gweight_c = Σ_{n,s} gm * x_hat      gbias_c = Σ_{n,s} gm          (C) -- reduced over N and S here
        for (int64_t c = 0; c < C; ++c) {
            if (want_w) gw.f32()[c] = static_cast<float>(sum_gxhat[c]);
            if (want_b) gb.f32()[c] = static_cast<float>(sum_g[c]);
        }
        if (!want_x) return {gx, gw, gb};

        // Pass 2, over (n, c) rows.
        float* pgx = gx.f32();
        const double M = static_cast<double>(N * S);
        const int64_t n_ch = C, n_sp = S;
#pragma omp parallel for schedule(static) if (N * C * S > kParallelWork)
        for (int64_t r = 0; r < N * n_ch; ++r) {
            const int64_t c = r % n_ch, base = r * n_sp;   // row (n, c): values [base, base + S)
            if (training) {
                // y = w x_hat + b, x_hat = (x - mean) rstd, mean and var taken over the channel's M values.
                // gx_hat = gm w. Differentiating through mean and var (biased, 1/M):
                //   gx = rstd/M * (M gx_hat - Σ gx_hat - x_hat Σ(gx_hat x_hat))
                //      = w rstd * (gm - Σgm/M - x_hat Σ(gm x_hat)/M)                 (N, C, S) -- exact
                const float k = w[c] * scale[c];
                const float mean_g = static_cast<float>(sum_g[c] / M);
                const float mean_gxhat = static_cast<float>(sum_gxhat[c] / M);
                with_xhat(c, [&](const auto& xhat) {
                    int64_t j = base;
                    if (kernels)
                        j = kernels->input_grad(xhat.row(pg, mask), base, base + n_sp, k, mean_g, mean_gxhat, pgx);
                    for (; j < base + n_sp; ++j) pgx[j] = k * (gm_at(pg, mask, j) - mean_g - xhat(j) * mean_gxhat);
                });
            } else {
                // y = x a + c with constant a = w / sqrt(running_var + eps):  gx = gm a      (N, C, S) -- exact
                const float a = w[c] * scale[c];
#pragma omp simd
                for (int64_t j = base; j < base + n_sp; ++j) pgx[j] = gm_at(pg, mask, j) * a;
            }
        }
        return {gx, gw, gb};
    }
};

// Where y goes. OverX: into x's storage (the caller gave x up and nothing of x is saved). OverXUnlessSaved: the
// save of x comes first and decides, as in gelu(Tensor&&): a tape that keeps x itself (the dense tape) holds its
// storage, and y takes a buffer of its own; one that keeps a code or a copy (Back Razor's per-channel int8, fp16,
// razored) needs x's values no more once it has saved, and y is written over them, so the conv-BN pair of a
// training step costs one activation buffer, not two.
enum class Output { Fresh, OverX, OverXUnlessSaved };

Tensor batch_norm_impl(const char* op, const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, bool training, float momentum, float eps,
                       bool relu, Output output = Output::Fresh) {
    if (!x_in.defined()) throw Error(fmt(op, ": x is undefined"));
    if (x_in.dtype() != DType::F32) throw Error(fmt(op, ": expected x f32, got ", dtype_name(x_in.dtype())));
    if (x_in.dim() < 2 || x_in.dim() > 4)
        throw Error(fmt(op, ": expected x (N, C), (N, C, L) or (N, C, H, W), got ", shape_str(x_in.shape()),
                        "; hint: add the batch dimension (unsqueeze(0)) for a single sample"));
    const int64_t N = x_in.size(0), C = x_in.size(1);
    int64_t S = 1;   // H*W, L, or 1
    for (int64_t d = 2; d < x_in.dim(); ++d) S *= x_in.size(d);
    check_channel_vector(weight, "weight", C, x_in);
    check_channel_vector(bias, "bias", C, x_in);
    check_channel_vector(running_mean, "running_mean", C, x_in);
    check_channel_vector(running_var, "running_var", C, x_in);
    if (running_mean.defined() != running_var.defined())
        throw Error(fmt(op, ": running_mean and running_var must be given together, got ",
                        running_mean.defined() ? "only running_mean" : "only running_var",
                        "; hint: pass both buffers, or neither (track_running_stats=False)"));
    if (!training && !running_mean.defined())
        throw Error(fmt(op, ": eval mode (training=false) needs running_mean and running_var, got none; hint: "
                            "pass the running buffers, or use training=true to normalise with batch statistics"));
    for (const Tensor* t : {&running_mean, &running_var})
        if (t->defined() && t->requires_grad())
            throw Error(fmt(op, ": running statistics must not require grad; hint: they are buffers, not parameters"));
    const int64_t M = N * S;
    if (training && M <= 1)
        throw Error(fmt(op, ": expected more than 1 value per channel when training, got x ", shape_str(x_in.shape()),
                        "; hint: use a batch of more than one sample, or eval mode"));

    Tensor x = x_in.contiguous();   // (N, C, S)
    Tensor mean = Tensor::empty({C}), rstd = Tensor::empty({C});   // (C): batch stats (training only)
    const float* px = x.f32();
    const bool update = training && running_mean.defined();

    std::vector<float> A(C), B(C);   // (C): y = x A + B per channel
    std::vector<double> s1, s2;
    if (training && M > 0) {
        // Pass 1: Σ(x - shift), Σ(x - shift)^2, shift = the channel's first value.
        channel_sums(N, C, S, s1, s2, [&](int64_t c, int64_t i0, int64_t len, float& fa, float& fb) {
            const float shift = px[c * S];
            float a = 0.f, b = 0.f;
#pragma omp simd reduction(+ : a, b)
            for (int64_t i = i0; i < i0 + len; ++i) {
                const float d = px[i] - shift;
                a += d;
                b += d * d;
            }
            fa += a, fb += b;
        });
    }
    for (int64_t c = 0; c < C; ++c) {
        float mu, inv_std;   // the per-channel centre and 1/std used for y
        if (training) {
            const double shift = px[c * S];
            const double dmean = s1[c] / M;
            const double var = std::max(0.0, s2[c] / M - dmean * dmean);   // biased: normalises the batch
            mu = static_cast<float>(shift + dmean);
            inv_std = static_cast<float>(1.0 / std::sqrt(var + eps));
            mean.f32()[c] = mu;
            rstd.f32()[c] = inv_std;
            if (update) {
                // running = (1 - momentum) running + momentum batch; running var takes the unbiased M/(M-1) var.
                float& rm = at(running_mean, c);
                float& rv = at(running_var, c);
                rm = static_cast<float>((1.0 - momentum) * rm + momentum * (shift + dmean));
                rv = static_cast<float>((1.0 - momentum) * rv + momentum * var * M / (M - 1));
            }
        } else {
            mu = at(running_mean, c);
            inv_std = static_cast<float>(1.0 / std::sqrt(static_cast<double>(at(running_var, c)) + eps));
        }
        // y = (x - mu) inv_std w + b = x a + (b - mu a)
        A[c] = (weight.defined() ? at(weight, c) : 1.f) * inv_std;
        B[c] = (bias.defined() ? at(bias, c) : 0.f) - mu * A[c];
    }
    if (update) {   // raw buffer writes above, outside the graph (no-grad); tell savers of these buffers
        running_mean.bump_version();
        running_var.bump_version();
    }

    // The node and its saves (the ReLU's mask comes after pass 2, which computes it). `out` is the node's output:
    // y, or for OverXUnlessSaved a throwaway alias of x until y exists.
    const auto record_node = [&](const Tensor& out) {
        auto node = record<BatchNormBackward>(op, {x, weight, bias}, out);
        if (!node) return node;
        node->N = N, node->C = C, node->S = S, node->training = training, node->eps = eps, node->relu = relu;
        const bool want_x = node->needs_grad(0), want_w = node->needs_grad(1);
        if (want_x && weight.defined()) node->ctx.save("weight", weight, SaveRole::Parameter);
        if (training) {
            if (want_x || want_w) {
                node->ctx.save("x", x, SaveRole::BatchNormInput);
                node->ctx.save("mean", mean, SaveRole::Statistics);
                node->ctx.save("rstd", rstd, SaveRole::Statistics);
            }
        } else {
            if (want_w) {
                node->ctx.save("x", x, SaveRole::BatchNormInput);
                node->ctx.save("running_mean", running_mean, SaveRole::Parameter);
            }
            if (want_x || want_w) node->ctx.save("running_var", running_var, SaveRole::Parameter);
        }
        return node;
    };
    std::shared_ptr<BatchNormBackward> node;
    bool over_x = output == Output::OverX;
    if (output == Output::OverXUnlessSaved) {
        node = record_node(x.detach());
        over_x = x.storage().use_count() == 1;   // not held by the tape
    }
    // Pass 2 (and the ReLU's mask, only when a node will be recorded to keep it). write_output reads each element
    // before writing it, so y may be x itself.
    Tensor y = over_x ? x.detach() : Tensor::empty(x.shape());
    BitMask mask = relu && any_requires_grad({x, weight, bias}) ? BitMask(x.numel()) : BitMask();
    write_output(px, y.f32(), mask.size() ? mask.words() : nullptr, N, C, S, A, B, relu);
    if (over_x) y.bump_version();
    if (output == Output::OverXUnlessSaved) {
        if (node) y.set_grad_fn(node);
    } else {
        node = record_node(y);
    }
    if (node && relu) node->ctx.save_mask("mask", std::move(mask), y.shape());
    // y = relu(x A_c + B_c) of the x just saved: a policy may keep the next conv's copy of y as that function of
    // x's stored form (SavePolicy::note_output).
    if (node && relu && node->ctx.has("x")) node->ctx.note_output(y, "x", A, B);
    return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps) {
    return batch_norm_impl("batch_norm", x, weight, bias, running_mean, running_var, training, momentum, eps, false);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, float momentum, float eps) {
    return batch_norm_impl("batch_norm_relu", x, weight, bias, running_mean, running_var, training, momentum, eps,
                           true);
}

namespace {
// Where batch_norm may write the y of an x the caller gave up. In eval mode nothing of x is saved when the weight is
// frozen or nothing is recorded at all (grad mode off: evaluation, prediction): over x. In training, when the save
// of x does not keep x itself (OverXUnlessSaved).
Output output_for(const Tensor& x, const Tensor& weight, bool training) {
    if (!may_write_over(x)) return Output::Fresh;
    if (training) return grad_enabled() ? Output::OverXUnlessSaved : Output::OverX;
    const bool saves_x = grad_enabled() && weight.defined() && weight.requires_grad();
    return saves_x ? Output::Fresh : Output::OverX;
}
}  // namespace

Tensor batch_norm(Tensor&& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps) {
    return batch_norm_impl("batch_norm", x, weight, bias, running_mean, running_var, training, momentum, eps, false,
                           output_for(x, weight, training));
}

Tensor batch_norm_relu(Tensor&& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, float momentum, float eps) {
    return batch_norm_impl("batch_norm_relu", x, weight, bias, running_mean, running_var, training, momentum, eps,
                           true, output_for(x, weight, training));
}

}  // namespace razor
