// optim/step_in_backward.cpp -- see step_in_backward.h.
#include "optim/step_in_backward.h"

#include <cmath>

namespace razor::optim {
namespace {
bool all_finite(const Tensor& g) {
    const Tensor c = g.contiguous();
    const float* p = c.f32();
    const int64_t n = c.numel();
    bool finite = true;
#pragma omp parallel for simd reduction(&& : finite) schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) finite = finite && std::isfinite(p[i]);
    return finite;
}
}  // namespace

StepInBackward::StepInBackward(Optimizer& opt) {
    for (size_t g = 0; g < opt.num_groups(); ++g) {
        const NamedParameters& params = opt.group_params(g);
        for (size_t i = 0; i < params.size(); ++i) {
            const Tensor& p = params[i].second;
            if (!p.requires_grad()) continue;
            const uint64_t id = p.register_post_accumulate_grad_hook([this, &opt, g, i](const Tensor& leaf) {
                const Tensor grad = leaf.grad();
                // After a non-finite gradient nothing more is updated: the step is already broken, and the caller
                // stops with the parameters before it applied and the rest untouched.
                if (!nonfinite_.empty() || !all_finite(grad)) {
                    if (nonfinite_.empty()) nonfinite_ = opt.group_params(g)[i].first;
                    leaf.zero_grad();
                    return;
                }
                opt.step_parameter(g, i);
                ++updated_;
                leaf.zero_grad();
            });
            hooks_.push_back({p, id});
        }
    }
}

StepInBackward::~StepInBackward() {
    for (const Hooked& h : hooks_) h.param.remove_post_accumulate_grad_hook(h.id);
}

}  // namespace razor::optim
