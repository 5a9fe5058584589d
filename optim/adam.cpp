// optim/adam.cpp -- see adam.h. Adam and AdamW share one kernel; only where weight decay enters differs.
#include "optim/adam.h"

#include <algorithm>
#include <cmath>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "optim/fma.h"

namespace razor::optim {

template <class Options>
void AdamBase<Options>::check_options(const Options& o) const {
    if (!(o.lr >= 0) || !(o.eps >= 0) || !(o.weight_decay >= 0) || !std::isfinite(o.lr) || !std::isfinite(o.eps) ||
        !std::isfinite(o.weight_decay))
        throw Error(fmt(this->type_name(), ": lr, eps and weight_decay must be >= 0 and finite, got lr ", o.lr, ", eps ", o.eps,
                        ", weight_decay ", o.weight_decay));
    for (int i = 0; i < 2; ++i)
        if (!(o.betas[i] >= 0 && o.betas[i] < 1))
            throw Error(fmt(this->type_name(), ": betas[", i, "] must be in [0, 1), got ", o.betas[i],
                            "; hint: PyTorch's defaults are (0.9, 0.999)"));
}

namespace {

// The f32 constants of one step of one parameter: the options rounded to f32 as PyTorch's kernels round scalars;
// the bias-corrected ones formed in double first.
struct AdamScalars {
    float beta1, beta2, one_minus_beta1, one_minus_beta2, weight_decay, eps;
    float shrink;                  // AdamW: 1 - lr * weight_decay
    float neg_step_size;           // -lr / (1 - beta1^t)
    float bias_correction2_sqrt;   // sqrt(1 - beta2^t)
};

constexpr int64_t kTile = 512;   // elements per tile: the denominators of one tile live on the stack

// x[i] = sqrt(x[i]), i < n. GCC does not vectorise std::sqrt without -fno-math-errno (it keeps a branch that sets
// errno for negative inputs), so the AVX path says it directly. Both round correctly: the results are identical.
void sqrt_inplace(float* x, int64_t n) {
    int64_t i = 0;
#if defined(__AVX__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#endif
    for (; i < n; ++i) x[i] = std::sqrt(x[i]);
}

// One Adam/AdamW step of one parameter, in PyTorch's op order (each line names the torch op it mirrors).
// p, g, m, v, v_max: (n), contiguous; v_max only with kAmsgrad. Tiles run in parallel; each is three passes so
// that the two element-wise passes vectorise around the square roots.
template <bool kDecoupled, bool kL2, bool kAmsgrad>
void adam_kernel(float* p, const float* g, float* m, float* v, float* v_max, int64_t n, const AdamScalars& s) {
    const int64_t tiles = (n + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t tile = 0; tile < tiles; ++tile) {
        const int64_t begin = tile * kTile, len = std::min(kTile, n - begin);
        float* pt = p + begin;
        const float* gt = g + begin;
        float* mt = m + begin;
        float* vt = v + begin;
        float* vmt = kAmsgrad ? v_max + begin : nullptr;
        float denom[kTile];   // (len): v (or v_max), then sqrt(v)
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) {
            if constexpr (kDecoupled) pt[i] *= s.shrink;                          // p.mul_(1 - lr * wd)
            const float gi = kL2 ? madd(pt[i], s.weight_decay, gt[i]) : gt[i];  // g.add(p, alpha=wd)
            mt[i] = madd(gi, s.one_minus_beta1, mt[i] * s.beta1);               // m.mul_(b1).add_(g, alpha=1-b1)
            vt[i] = madd(s.one_minus_beta2 * gi, gi, vt[i] * s.beta2);          // v.mul_(b2).addcmul_(g, g, 1-b2)
            if constexpr (kAmsgrad) vmt[i] = std::max(vmt[i], vt[i]);          // torch.maximum(v_max, v)
            denom[i] = kAmsgrad ? vmt[i] : vt[i];
        }
        sqrt_inplace(denom, len);                                              // v.sqrt()
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) {
            const float d = denom[i] / s.bias_correction2_sqrt + s.eps;         // (.. / bc2_sqrt).add_(eps)
            pt[i] = pt[i] + s.neg_step_size * mt[i] / d;                        // p.addcdiv_(m, denom, -step_size)
        }
    }
}

template <bool kDecoupled, bool kL2>
void adam_kernel(bool amsgrad, float* p, const float* g, float* m, float* v, float* v_max, int64_t n,
                 const AdamScalars& s) {
    if (amsgrad) adam_kernel<kDecoupled, kL2, true>(p, g, m, v, v_max, n, s);
    else adam_kernel<kDecoupled, kL2, false>(p, g, m, v, v_max, n, s);
}

}  // namespace

template <class Options>
void AdamBase<Options>::update(size_t group, const std::string& name, const Tensor& p, const Tensor& g) {
    const Options& o = this->groups_[group].options;
    const bool decoupled = decoupled_weight_decay();
    AdamScalars s{};
    s.beta1 = static_cast<float>(o.betas[0]);
    s.beta2 = static_cast<float>(o.betas[1]);
    s.one_minus_beta1 = static_cast<float>(1 - o.betas[0]);
    s.one_minus_beta2 = static_cast<float>(1 - o.betas[1]);
    s.weight_decay = static_cast<float>(o.weight_decay);
    s.eps = static_cast<float>(o.eps);
    s.shrink = static_cast<float>(1 - o.lr * o.weight_decay);
    const bool l2 = !decoupled && o.weight_decay != 0;   // PyTorch skips the add when weight_decay is 0
    bool fresh = false;
    int64_t& t = this->state(name, "step", {}, DType::I64, &fresh).i64()[0];
    // All slots are created with the step count; a step count without them is a broken checkpoint.
    auto slot = [&](const char* slot_name) -> float* {
        bool created = false;
        Tensor& st = this->state(name, slot_name, p.shape(), DType::F32, &created);
        if (created && !fresh)
            throw Error(fmt(this->type_name(), ".step: parameter '", name, "' has a step count but no '", slot_name,
                            "' state; hint: the loaded checkpoint is incomplete, or amsgrad was switched on after "
                            "training started"));
        return st.f32();
    };
    float* m = slot("exp_avg");         // (p's shape)
    float* v = slot("exp_avg_sq");      // (p's shape)
    float* v_max = o.amsgrad ? slot("max_exp_avg_sq") : nullptr;
    t += 1;
    // Bias corrections in double from this parameter's own step, as PyTorch computes them in Python.
    const double step = static_cast<double>(t);
    s.neg_step_size = static_cast<float>(-(o.lr / (1 - std::pow(o.betas[0], step))));
    s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(o.betas[1], step)));
    float* pp = p.f32();
    const float* pg = g.f32();
    const int64_t n = p.numel();
    if (decoupled) adam_kernel<true, false>(o.amsgrad, pp, pg, m, v, v_max, n, s);
    else if (l2) adam_kernel<false, true>(o.amsgrad, pp, pg, m, v, v_max, n, s);
    else adam_kernel<false, false>(o.amsgrad, pp, pg, m, v, v_max, n, s);
    p.bump_version();
}

template class AdamBase<AdamOptions>;
template class AdamBase<AdamWOptions>;

}  // namespace razor::optim
