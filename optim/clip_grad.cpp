// optim/clip_grad.cpp -- see clip_grad.h.
#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>

namespace razor::optim {
namespace {

constexpr int64_t kChunk = 1 << 16;

// max that keeps a NaN (std::max drops it when it comes second), so a NaN gradient gives a NaN inf-norm.
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

// sum |x|^p (or max |x| when p is inf) over n floats, in double; chunk partials combined in index order.
double accumulate(const float* x, int64_t n, double p) {
    const bool inf = std::isinf(p);
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
        double acc = 0;
        if (inf)
            for (int64_t i = begin; i < end; ++i) acc = nan_max(acc, std::abs(static_cast<double>(x[i])));
        else if (p == 2)   // simd: the order of the additions is fixed by the build's vector width, not by threads
#pragma omp simd reduction(+ : acc)
            for (int64_t i = begin; i < end; ++i) acc += static_cast<double>(x[i]) * x[i];
        else if (p == 1)
#pragma omp simd reduction(+ : acc)
            for (int64_t i = begin; i < end; ++i) acc += std::abs(static_cast<double>(x[i]));
        else
            for (int64_t i = begin; i < end; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), p);
        partial[static_cast<size_t>(c)] = acc;
    }
    double total = 0;
    for (double v : partial) total = inf ? nan_max(total, v) : total + v;
    return total;
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
    if (!(norm_type > 0))
        throw Error(fmt("clip_grad_norm_: norm_type must be > 0 (or infinity), got ", norm_type,
                        "; hint: 2 for the Euclidean norm"));
    std::vector<Tensor> grads;
    for (const Tensor& p : params) {
        if (!p.defined()) continue;
        Tensor g = p.grad();
        if (!g.defined()) continue;
        if (g.dtype() != DType::F32 || !g.is_contiguous())
            throw Error(fmt("clip_grad_norm_: the gradient of '", p.name(), "' is ", dtype_name(g.dtype()),
                            g.is_contiguous() ? "" : " non-contiguous", "; hint: expected the f32 gradient backward "
                            "writes"));
        grads.push_back(g);
    }
    if (grads.empty()) return 0.0;
    const bool inf = std::isinf(norm_type);
    double acc = 0;
    for (const Tensor& g : grads) {
        const double part = accumulate(g.f32(), g.numel(), norm_type);
        acc = inf ? nan_max(acc, part) : acc + part;
    }
    const double total = inf ? acc : norm_type == 2 ? std::sqrt(acc) : std::pow(acc, 1.0 / norm_type);
    if (!std::isfinite(total) && error_if_nonfinite)
        throw Error(fmt("clip_grad_norm_: the total norm of order ", norm_type, " of the gradients is ", total,
                        ", so it cannot be clipped; hint: lower the learning rate or look for a NaN in the loss"));
    // PyTorch forms the coefficient in f32 from its f32 norm; here from the double norm, rounded once to f32.
    const float coef = static_cast<float>(max_norm / (total + 1e-6));
    if (!(coef >= 1.f)) {   // also NaN, as PyTorch's clamp(coef, max=1) keeps NaN
        NoGradGuard no_grad;
        for (Tensor& g : grads) g.mul_(coef);
    }
    return total;
}

double clip_grad_norm_(const NamedParameters& params, double max_norm, double norm_type, bool error_if_nonfinite) {
    std::vector<Tensor> tensors;
    tensors.reserve(params.size());
    for (const auto& [name, p] : params) tensors.push_back(p);
    return clip_grad_norm_(tensors, max_norm, norm_type, error_if_nonfinite);
}

}  // namespace razor::optim
