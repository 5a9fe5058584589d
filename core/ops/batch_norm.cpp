// core/ops/batch_norm.cpp -- batch normalisation over the channel dimension.
//
// reference: torch.nn.functional.batch_norm. docs: docs/back-razor.md §5.4 (BN modes), §6.3 (razored input).
//
// Dimension letters: x is viewed as (N, C, S) with S = H*W (or L, or 1 for (N, C) input); M = N*S values per
// channel. Statistics are accumulated in double, in one pass, on values shifted by the channel's first element
// (sum and sum of squares of x - shift: no cancellation when |mean| >> std).
//
// Saves:
//   training=true   x as SaveKind::Activation (Back Razor may prune it) and per-channel mean and rstd as
//                   SaveKind::Statistics (dense fp32, 2 floats per channel), computed from the true x. Backward
//                   recomputes x_hat = (x - mean) * rstd from them (back-razor.md §6.3), so a razored x works
//                   unchanged. weight by reference (SaveKind::Parameter, 0 bytes) when x needs a gradient.
//                   Only what is needed: x, mean, rstd when x or weight needs a gradient; nothing for bias alone.
//   training=false  y = x*a + c per channel, a = weight * rstd_run. gx = g*a needs no activation: running_var and
//                   weight are held by reference (SaveKind::Parameter, 0 bytes, version-checked) when x needs a
//                   gradient; x (Activation) and running_mean (reference) only when weight needs a gradient.
//                   So a frozen BN in eval mode saves 0 bytes.
// The running statistics are module buffers held by the model anyway; a training call after an eval forward
// writes them in place, which makes that eval node's backward throw (version check) instead of using new values.
#include "core/ops/batch_norm.h"

#include <cmath>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

constexpr int64_t kParallelWork = 1 << 14;   // values per call below which threads cost more than they save

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

// gx, gweight, gbias of batch_norm.
struct BatchNormBackward final : Node {
    int64_t N = 0, C = 0, S = 0;   // x viewed as (N, C, S)
    bool training = true;
    float eps = 1e-5f;

    std::vector<Tensor> backward(const Tensor& g_in) override {
        Tensor g = g_in.contiguous();   // (N, C, S)
        const bool want_x = needs_grad(0), want_w = needs_grad(1), want_b = needs_grad(2);
        Tensor gx = want_x ? Tensor::empty(g.shape()) : Tensor();          // (N, C, S)
        Tensor gw = want_w ? Tensor::empty({C}) : Tensor();                // (C)
        Tensor gb = want_b ? Tensor::empty({C}) : Tensor();                // (C)
        const bool need_xhat = want_x || want_w;
        // Per-channel centre and scale of x_hat = (x - centre_c) * scale_c: batch (mean, rstd) in training,
        // (running_mean, 1/sqrt(running_var + eps)) in eval.
        Tensor x, mean, rstd, running_mean, running_var, weight;
        if (ctx.has("weight")) weight = ctx.unpack("weight");
        if (training) {
            if (need_xhat) x = ctx.unpack("x"), mean = ctx.unpack("mean"), rstd = ctx.unpack("rstd");
        } else {
            if (want_w) x = ctx.unpack("x"), running_mean = ctx.unpack("running_mean");
            if (need_xhat) running_var = ctx.unpack("running_var");
        }
        const float* pg = g.f32();
        const float* px = x.defined() ? x.f32() : nullptr;
        float* pgx = want_x ? gx.f32() : nullptr;
        const int64_t n_img = N, n_ch = C, n_sp = S;
        const double M = static_cast<double>(N * S);

#pragma omp parallel for schedule(static) if (N * C * S > kParallelWork && C > 1)
        for (int64_t c = 0; c < n_ch; ++c) {
            const float w = weight.defined() ? at(weight, c) : 1.f;
            float centre = 0.f, scale = 1.f;
            if (need_xhat) {
                if (training) {
                    centre = mean.f32()[c], scale = rstd.f32()[c];
                } else {
                    scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(at(running_var, c)) + eps));
                    if (want_w) centre = at(running_mean, c);
                }
            }
            // Reductions over the channel's M values: sum_g = Σ g, sum_gxhat = Σ g * x_hat.
            double sum_g = 0, sum_gxhat = 0;
            const bool need_sums = want_b || want_w || (want_x && training);
            if (need_sums) {
                for (int64_t n = 0; n < n_img; ++n) {
                    const int64_t base = (n * n_ch + c) * n_sp;
                    const float* gr = pg + base;   // (S)
                    if (px && (want_w || training)) {
                        const float* xr = px + base;   // (S)
                        for (int64_t s = 0; s < n_sp; ++s) {
                            sum_g += gr[s];
                            sum_gxhat += static_cast<double>(gr[s]) * ((xr[s] - centre) * scale);
                        }
                    } else {
                        for (int64_t s = 0; s < n_sp; ++s) sum_g += gr[s];
                    }
                }
            }
            // gweight_c = Σ_{n,s} g * x_hat      gbias_c = Σ_{n,s} g          (C) -- reduced over N and S here
            if (want_w) gw.f32()[c] = static_cast<float>(sum_gxhat);
            if (want_b) gb.f32()[c] = static_cast<float>(sum_g);
            if (!want_x) continue;
            if (training) {
                // y = w x_hat + b, x_hat = (x - mean) rstd, mean and var taken over the channel's M values.
                // gx_hat = g w. Differentiating through mean and var (biased, 1/M):
                //   gx = rstd/M * (M gx_hat - Σ gx_hat - x_hat Σ(gx_hat x_hat))
                //      = w rstd * (g - Σg/M - x_hat Σ(g x_hat)/M)                  (N, C, S) -- exact
                const float k = w * scale;
                const float mean_g = static_cast<float>(sum_g / M);
                const float mean_gxhat = static_cast<float>(sum_gxhat / M);
                for (int64_t n = 0; n < n_img; ++n) {
                    const int64_t base = (n * n_ch + c) * n_sp;
                    const float* gr = pg + base;
                    const float* xr = px + base;
                    float* o = pgx + base;
                    for (int64_t s = 0; s < n_sp; ++s)
                        o[s] = k * (gr[s] - mean_g - (xr[s] - centre) * scale * mean_gxhat);
                }
            } else {
                // y = x a + c with constant a = w / sqrt(running_var + eps):  gx = g a      (N, C, S) -- exact
                const float a = w * scale;
                for (int64_t n = 0; n < n_img; ++n) {
                    const int64_t base = (n * n_ch + c) * n_sp;
                    for (int64_t s = 0; s < n_sp; ++s) pgx[base + s] = pg[base + s] * a;
                }
            }
        }
        return {gx, gw, gb};
    }
};

}  // namespace

Tensor batch_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps) {
    if (!x_in.defined()) throw Error("batch_norm: x is undefined");
    if (x_in.dtype() != DType::F32)
        throw Error(fmt("batch_norm: expected x f32, got ", dtype_name(x_in.dtype())));
    if (x_in.dim() < 2 || x_in.dim() > 4)
        throw Error(fmt("batch_norm: expected x (N, C), (N, C, L) or (N, C, H, W), got ", shape_str(x_in.shape()),
                        "; hint: add the batch dimension (unsqueeze(0)) for a single sample"));
    const int64_t N = x_in.size(0), C = x_in.size(1);
    int64_t S = 1;   // H*W, L, or 1
    for (int64_t d = 2; d < x_in.dim(); ++d) S *= x_in.size(d);
    check_channel_vector(weight, "weight", C, x_in);
    check_channel_vector(bias, "bias", C, x_in);
    check_channel_vector(running_mean, "running_mean", C, x_in);
    check_channel_vector(running_var, "running_var", C, x_in);
    if (running_mean.defined() != running_var.defined())
        throw Error(fmt("batch_norm: running_mean and running_var must be given together, got ",
                        running_mean.defined() ? "only running_mean" : "only running_var",
                        "; hint: pass both buffers, or neither (track_running_stats=False)"));
    if (!training && !running_mean.defined())
        throw Error("batch_norm: eval mode (training=false) needs running_mean and running_var, got none; hint: "
                    "pass the running buffers, or use training=true to normalise with batch statistics");
    for (const Tensor* t : {&running_mean, &running_var})
        if (t->defined() && t->requires_grad())
            throw Error("batch_norm: running statistics must not require grad; hint: they are buffers, not parameters");
    const int64_t M = N * S;
    if (training && M <= 1)
        throw Error(fmt("batch_norm: expected more than 1 value per channel when training, got x ",
                        shape_str(x_in.shape()), "; hint: use a batch of more than one sample, or eval mode"));

    Tensor x = x_in.contiguous();   // (N, C, S)
    Tensor y = Tensor::empty(x.shape());
    Tensor mean = Tensor::empty({C}), rstd = Tensor::empty({C});   // (C): batch stats (training only)
    const float* px = x.f32();
    float* py = y.f32();
    const bool update = training && running_mean.defined();

#pragma omp parallel for schedule(static) if (N * C * S > kParallelWork && C > 1)
    for (int64_t c = 0; c < C; ++c) {
        float mu, inv_std;   // the per-channel centre and 1/std used for y
        if (training) {
            // One pass: Σ(x - shift), Σ(x - shift)^2 in double, shift = the channel's first value.
            const double shift = px[c * S];
            double s1 = 0, s2 = 0;
            for (int64_t n = 0; n < N; ++n) {
                const float* xr = px + (n * C + c) * S;   // (S)
                for (int64_t s = 0; s < S; ++s) {
                    const double d = xr[s] - shift;
                    s1 += d;
                    s2 += d * d;
                }
            }
            const double dmean = s1 / M;
            const double var = std::max(0.0, s2 / M - dmean * dmean);   // biased: normalises the batch
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
        const float a = (weight.defined() ? at(weight, c) : 1.f) * inv_std;
        const float b = (bias.defined() ? at(bias, c) : 0.f) - mu * a;
        for (int64_t n = 0; n < N; ++n) {
            const float* xr = px + (n * C + c) * S;
            float* yr = py + (n * C + c) * S;
            for (int64_t s = 0; s < S; ++s) yr[s] = xr[s] * a + b;
        }
    }
    if (update) {   // raw buffer writes above, outside the graph (no-grad); tell savers of these buffers
        running_mean.bump_version();
        running_var.bump_version();
    }

    if (auto node = record<BatchNormBackward>("batch_norm", {x, weight, bias}, y)) {
        node->N = N, node->C = C, node->S = S, node->training = training, node->eps = eps;
        const bool want_x = node->needs_grad(0), want_w = node->needs_grad(1);
        if (want_x && weight.defined()) node->ctx.save("weight", weight, SaveKind::Parameter);
        if (training) {
            if (want_x || want_w) {
                node->ctx.save("x", x, SaveKind::Activation);
                node->ctx.save("mean", mean, SaveKind::Statistics);
                node->ctx.save("rstd", rstd, SaveKind::Statistics);
            }
        } else {
            if (want_w) {
                node->ctx.save("x", x, SaveKind::Activation);
                node->ctx.save("running_mean", running_mean, SaveKind::Parameter);
            }
            if (want_x || want_w) node->ctx.save("running_var", running_var, SaveKind::Parameter);
        }
    }
    return y;
}

}  // namespace razor
