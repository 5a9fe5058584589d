// core/anomaly.cpp -- anomaly mode: the checks the engine runs while it is on (see anomaly.h).
#include "core/anomaly.h"

#include <cmath>

#include "core/autograd.h"

namespace razor {
namespace {

struct AnomalyState {
    std::vector<std::pair<std::string, Tensor>> named_leaves;
    const AnomalyState* outer = nullptr;
};
thread_local const AnomalyState* t_anomaly = nullptr;

std::string leaf_name(const Tensor& t) {
    for (const AnomalyState* s = t_anomaly; s; s = s->outer)
        for (const auto& [name, leaf] : s->named_leaves)
            if (leaf.impl() == t.impl()) return name;
    return t.name();
}

}  // namespace

NonFiniteCount count_nonfinite(const Tensor& t) {
    NonFiniteCount c;
    if (!t.defined() || t.dtype() != DType::F32 || t.numel() == 0) return c;
    const Tensor packed = t.is_contiguous() ? t : t.clone();   // clone: a copy without autograd history
    const float* p = packed.f32();
    const int64_t n = packed.numel();
    int64_t nan = 0, inf = 0;
#pragma omp parallel for simd reduction(+ : nan, inf) schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
        nan += std::isnan(p[i]) ? 1 : 0;
        inf += std::isinf(p[i]) ? 1 : 0;
    }
    c.nan = nan, c.inf = inf;
    return c;
}

bool grads_finite(const std::vector<Tensor>& params) {
    for (const Tensor& p : params) {
        const Tensor g = p.grad();
        if (!g.defined() || g.dtype() != DType::F32) continue;
        // x - x is 0 for every finite x and NaN for NaN and +-Inf: one branch-free, vectorisable reduction.
        const Tensor packed = g.is_contiguous() ? g : g.clone();
        const float* v = packed.f32();
        const int64_t n = packed.numel();
        float acc = 0.f;
#pragma omp parallel for simd reduction(+ : acc) schedule(static) if (n > (1 << 16))
        for (int64_t i = 0; i < n; ++i) acc += v[i] - v[i];
        if (acc != 0.f || std::isnan(acc)) return false;
    }
    return true;
}

std::string NonFiniteReport::describe() const {
    return fmt(op.empty() ? "(no op)" : op, " (module '", module_path.empty() ? "<top level>" : module_path, "') ",
               where, " ", shape_str(shape), ": ", count.nan, " NaN, ", count.inf, " Inf of ", shape_numel(shape),
               " values");
}

NonFiniteError::NonFiniteError(NonFiniteReport report)
    : Error(fmt("non-finite value: ", report.describe(),
                "; hint: a NaN/Inf input or weight is named as such, otherwise the op itself produced it (log or "
                "division of non-positive values, overflow from a large learning rate)")),
      report_(std::move(report)) {}

AnomalyMode::AnomalyMode(std::vector<std::pair<std::string, Tensor>> named_leaves) : previous_(t_anomaly) {
    t_anomaly = new AnomalyState{std::move(named_leaves), t_anomaly};
}

AnomalyMode::~AnomalyMode() {
    delete t_anomaly;
    t_anomaly = static_cast<const AnomalyState*>(previous_);
}

bool anomaly_mode_enabled() { return t_anomaly != nullptr; }

bool may_write_over(const Tensor& t) {
    return t.defined() && t.dtype() == DType::F32 && t.sole_owner() && !anomaly_mode_enabled();
}

std::optional<NonFiniteReport> detect_anomaly(const std::function<void()>& step,
                                              std::vector<std::pair<std::string, Tensor>> named_leaves) {
    AnomalyMode anomaly(std::move(named_leaves));
    try {
        step();
    } catch (const NonFiniteError& e) {
        return e.report();
    }
    return std::nullopt;
}

namespace detail {

void anomaly_check_forward(const std::string& op, const std::string& module_path, const Tensor* inputs, size_t count,
                           const Tensor& output) {
    // Inputs without a grad_fn first: their values did not come from a checked op (parameters, data, constants).
    for (size_t i = 0; i < count; ++i) {
        const Tensor& x = inputs[i];
        if (!x.defined() || x.grad_fn()) continue;
        const NonFiniteCount c = count_nonfinite(x);
        if (!c.any()) continue;
        const std::string name = leaf_name(x);
        std::string what = x.requires_grad() ? (name.empty() ? "a parameter" : "parameter " + name)
                                             : (name.empty() ? "data or a constant" : name);
        throw NonFiniteError({op, module_path, fmt("input ", i, " (", what, ")"), x.shape(), c});
    }
    const NonFiniteCount c = count_nonfinite(output);
    if (c.any()) throw NonFiniteError({op, module_path, "forward output", output.shape(), c});
}

void anomaly_check_backward(const std::string& op, const std::string& module_path, const std::vector<Tensor>& grads) {
    for (size_t i = 0; i < grads.size(); ++i) {
        const NonFiniteCount c = count_nonfinite(grads[i]);
        if (c.any())
            throw NonFiniteError({op, module_path, fmt("backward gradient for input ", i), grads[i].shape(), c});
    }
}

}  // namespace detail
}  // namespace razor
