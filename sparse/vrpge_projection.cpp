// sparse/vrpge_projection.cpp -- the global projection onto {0 ≤ s ≤ 1, Σ s ≤ K}. See vrpge_projection.h.
#include "sparse/vrpge_projection.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace razor::sparse {

namespace {

double clip01(double x) { return std::min(1.0, std::max(0.0, x)); }

// All scores as doubles, in order. n is at most ~10^4 channels, so one copy costs nothing next to a training step.
std::vector<double> gather(const std::vector<Tensor>& z, double budget) {
    if (!(budget >= 0) || !std::isfinite(budget))
        throw Error(fmt("project_scores_: expected a budget K = rho * n >= 0, got ", budget,
                        "; hint: rho is the channel KEEP ratio in (0, 1]"));
    std::vector<double> out;
    for (const Tensor& t : z) {
        if (!t.defined() || t.dtype() != DType::F32)
            throw Error("project_scores_: expected defined f32 score tensors; hint: pass ChannelScores::parameters()");
        for (float v : t.to_vector()) {
            if (!std::isfinite(v))
                throw Error(fmt("project_scores_: got a non-finite score ", v, " in ", t.name(),
                                "; hint: check the s gradient (losses) and the Adam step"));
            out.push_back(v);
        }
    }
    return out;
}

double excess(const std::vector<double>& z, double v, double budget) {   // f(v) = Σ clip(z − v, 0, 1) − K
    double sum = 0;
    for (double x : z) sum += clip01(x - v);
    return sum - budget;
}

// The reference's bisection (spec §5.2), step for step.
ProjectionResult bisection(const std::vector<double>& z, double budget) {
    ProjectionResult r;
    if (excess(z, 0.0, budget) < 0) return r;   // slack: v = 0 (the reference tests f(0) < 0, not ≤ 0)
    double a = 0, b = *std::max_element(z.begin(), z.end()), v = 0;
    int itr = 0;
    for (;;) {
        ++itr;
        v = (a + b) / 2;
        const double o = excess(z, v, budget);
        if (std::fabs(o) < 1e-3 || itr > 20) break;   // 1e-3 channels, at most 21 evaluations
        (o < 0 ? b : a) = v;
    }
    r.shift = std::max(0.0, v);
    r.iterations = itr;
    return r;
}

// The exact root of the piecewise-linear g (spec §5.3). Walking v downward from max z, where g = −K: channel i
// becomes active (slope −1 in v) at v = z_i and saturates at 1 (slope 0 again) at v = z_i − 1. Between consecutive
// events g is linear with slope −active, so the first piece where g reaches 0 gives v by linear interpolation.
ProjectionResult exact(const std::vector<double>& z, double budget) {
    ProjectionResult r;
    if (excess(z, 0.0, budget) <= 0) return r;   // slack (g(0) ≤ 0): v = 0
    std::vector<std::pair<double, int>> events;   // (v, +1 activates / −1 saturates)
    events.reserve(2 * z.size() + 1);
    for (double x : z) events.emplace_back(x, +1), events.emplace_back(x - 1, -1);
    events.emplace_back(0.0, 0);   // g(0) > 0 guarantees the root is found at or before v = 0
    std::sort(events.begin(), events.end(), [](const auto& p, const auto& q) { return p.first > q.first; });
    double v = events.front().first;   // max z: every clip(z − v) is 0, so g = −K
    double g = -budget;
    int64_t active = 0;
    for (const auto& [e, delta] : events) {
        if (e < v) {
            const double g_e = g + static_cast<double>(active) * (v - e);   // g is linear on [e, v]
            if (g_e >= 0) {
                // active > 0 here: g rose from < 0 to ≥ 0 on this piece.
                r.shift = v - (0 - g) / static_cast<double>(active);
                return r;
            }
            g = g_e;
            v = e;
        }
        active += delta;
    }
    RAZOR_CHECK(false) << "exact projection: no root found although g(0) > 0 (K = " << budget << ")";
    return r;
}

}  // namespace

ProjectionResult projection_shift(const std::vector<Tensor>& z, double budget, ProjectionMethod method) {
    const std::vector<double> zd = gather(z, budget);
    if (zd.empty()) return {};
    ProjectionResult r = method == ProjectionMethod::Exact ? exact(zd, budget) : bisection(zd, budget);
    r.sum = excess(zd, r.shift, 0.0);
    return r;
}

ProjectionResult project_scores_(const std::vector<Tensor>& z, double budget, ProjectionMethod method) {
    const ProjectionResult r = projection_shift(z, budget, method);
    NoGradGuard no_grad;
    for (const Tensor& t : z) {
        RAZOR_CHECK(t.is_contiguous()) << "score tensor " << t.name() << " is not contiguous";
        float* p = t.data<float>();
        for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(clip01(static_cast<double>(p[i]) - r.shift));
        t.bump_version();
    }
    return r;
}

}  // namespace razor::sparse
