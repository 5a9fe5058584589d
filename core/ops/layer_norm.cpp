// core/ops/layer_norm.cpp -- layer normalisation over the last dimension.
//
// reference: torch.nn.functional.layer_norm(x, (D,), weight, bias, eps). docs: docs/back-razor.md §6.3.
//
// Dimension letters: x (..., D) is viewed as (R, D), R = the product of the leading dimensions (rows). Per-row
// statistics are accumulated in double, in one pass, on values shifted by the row's first element.
//
// Saves: x as SaveRole::LayerNormInput (Back Razor may prune it) and per-row mean and rstd as SaveRole::Statistics
//        (dense fp32, 2 floats per row, computed from the true x), when x or weight needs a gradient; backward
//        recomputes x_hat = (x - mean) * rstd (back-razor.md §6.3: with a razored x, x_hat at pruned positions is
//        -mean * rstd, not 0, as the reference). weight by reference (SaveRole::Parameter, 0 bytes) when x needs a
//        gradient. Nothing when only bias needs one.
#include "core/ops/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

constexpr int64_t kParallelWork = 1 << 14;
// gweight/gbias are reduced over rows in this many fixed row chunks (double partials, summed in chunk order):
// parallel, and the same result for any thread count.
constexpr int64_t kReduceChunks = 64;

void check_row_vector(const Tensor& t, const char* what, int64_t D, const Tensor& x) {
    if (!t.defined()) return;
    if (t.dtype() != DType::F32)
        throw Error(fmt("layer_norm: expected ", what, " f32, got ", dtype_name(t.dtype())));
    if (t.dim() != 1 || t.size(0) != D)
        throw Error(fmt("layer_norm: expected ", what, " (", D, ") for x ", shape_str(x.shape()), ", got ",
                        shape_str(t.shape()), "; hint: normalized_shape must equal the last dimension of x"));
}

struct LayerNormBackward final : Node {
    int64_t R = 0, D = 0;   // x viewed as (R, D)

    std::vector<Tensor> backward(const Tensor& g_in) override {
        Tensor g = g_in.contiguous();   // (R, D)
        const bool want_x = needs_grad(0), want_w = needs_grad(1), want_b = needs_grad(2);
        Tensor x, mean, rstd, weight;
        if (want_x || want_w) x = ctx.unpack("x").contiguous(), mean = ctx.unpack("mean"), rstd = ctx.unpack("rstd");
        if (ctx.has("weight")) weight = ctx.unpack("weight").contiguous();
        Tensor gx = want_x ? Tensor::empty(g.shape()) : Tensor();   // (R, D)
        const int64_t rows = R, d = D;
        const int64_t chunks = (want_w || want_b) ? std::min(rows, kReduceChunks) : 0;
        std::vector<double> part_w(want_w ? chunks * d : 0), part_b(want_b ? chunks * d : 0);   // (chunks, D)
        const float* pg = g.f32();
        const float* px = x.defined() ? x.f32() : nullptr;
        const float* pw = weight.defined() ? weight.f32() : nullptr;
        float* pgx = want_x ? gx.f32() : nullptr;

        // Rows [k*R/K, (k+1)*R/K) of chunk k (K = chunks), or one row per iteration when no reduction is needed.
        const int64_t blocks = chunks ? chunks : rows;
#pragma omp parallel for schedule(static) if (R * D > kParallelWork)
        for (int64_t k = 0; k < blocks; ++k) {
            const int64_t r0 = k * rows / blocks, r1 = (k + 1) * rows / blocks;
            double* accw = want_w ? part_w.data() + k * d : nullptr;   // (D)
            double* accb = want_b ? part_b.data() + k * d : nullptr;   // (D)
            for (int64_t r = r0; r < r1; ++r) {
                const float* gr = pg + r * d;   // (D)
                if (accb)
                    for (int64_t j = 0; j < d; ++j) accb[j] += gr[j];
                if (!px) continue;
                const float* xr = px + r * d;   // (D)
                const float mu = mean.f32()[r], rs = rstd.f32()[r];
                // gweight_j = Σ_rows g_j x_hat_j        gbias_j = Σ_rows g_j          (D) -- exact
                if (accw)
                    for (int64_t j = 0; j < d; ++j) accw[j] += static_cast<double>(gr[j]) * ((xr[j] - mu) * rs);
                if (!pgx) continue;
                // y = w x_hat + b, x_hat = (x - mean) rstd over the row's D values; gx_hat = g w.
                // Through mean and (biased) var:
                //   gx = rstd (gx_hat - mean_D(gx_hat) - x_hat mean_D(gx_hat x_hat))     (D) -- exact
                double s1 = 0, s2 = 0;
                for (int64_t j = 0; j < d; ++j) {
                    const float gh = pw ? gr[j] * pw[j] : gr[j];
                    s1 += gh;
                    s2 += static_cast<double>(gh) * ((xr[j] - mu) * rs);
                }
                const float m1 = static_cast<float>(s1 / d), m2 = static_cast<float>(s2 / d);
                float* o = pgx + r * d;
                for (int64_t j = 0; j < d; ++j) {
                    const float gh = pw ? gr[j] * pw[j] : gr[j];
                    o[j] = rs * (gh - m1 - (xr[j] - mu) * rs * m2);
                }
            }
        }
        // Fold the chunk partials in a fixed order.
        auto fold = [&](const std::vector<double>& part) {
            Tensor out = Tensor::empty({D});   // (D)
            float* o = out.f32();
            for (int64_t j = 0; j < d; ++j) {
                double acc = 0;
                for (int64_t k = 0; k < chunks; ++k) acc += part[k * d + j];
                o[j] = static_cast<float>(acc);
            }
            return out;
        };
        Tensor gw = want_w ? fold(part_w) : Tensor();
        Tensor gb = want_b ? fold(part_b) : Tensor();
        return {gx, gw, gb};
    }
};

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, float eps) {
    if (!x_in.defined()) throw Error("layer_norm: x is undefined");
    if (x_in.dtype() != DType::F32)
        throw Error(fmt("layer_norm: expected x f32, got ", dtype_name(x_in.dtype())));
    if (x_in.dim() < 1 || x_in.size(-1) == 0)
        throw Error(fmt("layer_norm: expected x (..., D) with D > 0, got ", shape_str(x_in.shape()),
                        "; hint: layer_norm normalises over the last dimension"));
    const int64_t D = x_in.size(-1);
    const int64_t R = x_in.numel() / D;
    check_row_vector(weight, "weight", D, x_in);
    check_row_vector(bias, "bias", D, x_in);

    Tensor x = x_in.contiguous();                                  // (R, D)
    Tensor y = Tensor::empty(x.shape());                           // (R, D)
    Tensor mean = Tensor::empty({R}), rstd = Tensor::empty({R});   // (R)
    Tensor w = weight.defined() ? weight.contiguous() : Tensor();
    Tensor b = bias.defined() ? bias.contiguous() : Tensor();
    const float* px = x.f32();
    const float* pw = w.defined() ? w.f32() : nullptr;
    const float* pb = b.defined() ? b.f32() : nullptr;
    float* py = y.f32();
    float* pmean = mean.f32();
    float* prstd = rstd.f32();

#pragma omp parallel for schedule(static) if (R * D > kParallelWork)
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = px + r * D;   // (D)
        // One pass: Σ(x - shift), Σ(x - shift)^2 in double, shift = the row's first value.
        const double shift = xr[0];
        double s1 = 0, s2 = 0;
        for (int64_t j = 0; j < D; ++j) {
            const double dv = xr[j] - shift;
            s1 += dv;
            s2 += dv * dv;
        }
        const double dmean = s1 / D;
        const double var = std::max(0.0, s2 / D - dmean * dmean);   // biased, as PyTorch
        const float mu = static_cast<float>(shift + dmean);
        const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
        pmean[r] = mu;
        prstd[r] = rs;
        float* yr = py + r * D;
        for (int64_t j = 0; j < D; ++j) {
            const float xh = (xr[j] - mu) * rs;
            yr[j] = (pw ? xh * pw[j] : xh) + (pb ? pb[j] : 0.f);
        }
    }

    if (auto node = record<LayerNormBackward>("layer_norm", {x, weight, bias}, y)) {
        node->R = R, node->D = D;
        if (node->needs_grad(0) || node->needs_grad(1)) {
            node->ctx.save("x", x, SaveRole::LayerNormInput);
            node->ctx.save("mean", mean, SaveRole::Statistics);
            node->ctx.save("rstd", rstd, SaveRole::Statistics);
        }
        if (node->needs_grad(0) && weight.defined()) node->ctx.save("weight", weight, SaveRole::Parameter);
    }
    return y;
}

}  // namespace razor
