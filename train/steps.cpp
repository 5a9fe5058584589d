// train/steps.cpp -- see steps.h.
#include "train/steps.h"

#include <cmath>

#include "core/anomaly.h"
#include "core/core.h"
#include "optim/clip_grad.h"
#include "optim/step_in_backward.h"

namespace razor::train {

DenseStep::DenseStep(nn::Module& model, optim::Optimizer& opt, optim::LRScheduler* sched, DenseStepOptions options)
    : model_(model), opt_(opt), sched_(sched), options_(options) {
    if (options_.step_in_backward && options_.clip > 0)
        throw Error(fmt("the step in backward updates each parameter before the gradient norm over all of them is "
                        "known, so it cannot clip (clip ", options_.clip, "); hint: drop --clip-grad or "
                        "--step-in-backward"));
}

StepResult DenseStep::run(const data::Batch& b) {
    StepResult r;
    opt_.zero_grad();
    r.logits = model_(b.images);                                           // (B, K)
    const Tensor loss = cross_entropy(r.logits, b.labels, options_.label_smoothing);
    const float value = loss.item();
    r.loss = value;
    if (!std::isfinite(value)) {
        r.fault = fmt("the loss became ", value);
        return r;
    }
    if (options_.step_in_backward) {
        optim::StepInBackward fused(opt_);
        loss.backward();
        if (!fused.nonfinite().empty())
            r.fault = fmt("the gradient of '", fused.nonfinite(), "' became non-finite; the step in backward had "
                          "already updated ", fused.updated(), " parameters (rerun without --step-in-backward to "
                          "have the op that produced it named)");
        return r;
    }
    loss.backward();
    if (options_.clip > 0) {
        const double norm = optim::clip_grad_norm_(opt_.params(), options_.clip);
        if (!std::isfinite(norm)) r.fault = fmt("the gradient norm became ", norm);
    } else if (!grads_finite(model_.parameters())) {
        r.fault = "a gradient became non-finite";
    }
    return r;
}

void DenseStep::update() {
    if (!options_.step_in_backward) opt_.step();
}

void DenseStep::advance() {
    if (sched_) sched_->step();
}

double DenseStep::lr() const { return opt_.lr(); }

void DenseStep::rerun(const data::Batch& b) {
    opt_.zero_grad();
    cross_entropy(model_(b.images), b.labels, options_.label_smoothing).backward();
}

StepResult VrpgeStep::run(const data::Batch& b) {
    const VrpgeTrainer::Step s = trainer_.step(b.images, b.labels, masks_);
    StepResult r;
    r.loss = s.loss;
    r.logits = s.logits;
    if (s.resampled) {
        if (!std::isfinite(s.result.loss1) || !std::isfinite(s.result.loss2) || !std::isfinite(s.grad_norm))
            r.fault = fmt("the loss or gradient norm became non-finite (losses ", s.result.loss1, ", ",
                          s.result.loss2, ", norm ", s.grad_norm, ")");
    } else if (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm)) {
        r.fault = fmt("the loss or gradient norm became non-finite (loss ", s.loss, ", norm ", s.grad_norm,
                      "; a step between resamples)");
    }
    // s_grad_norm is reported by the steps that update s only: the epoch's mean over all steps divided by the mean of
    // "resampled" is its mean over the resample steps (apps/sparse_records.cpp).
    r.metrics = {{"flops_ratio", s.cost_ratio},
                 {"grad_norm", s.grad_norm},
                 {"s_grad_norm", s.resampled ? s.result.s_grad_norm : 0.0},
                 {"clipped", s.grad_norm > trainer_.options.max_norm ? 1.0 : 0.0},
                 {"resampled", s.resampled ? 1.0 : 0.0}};
    return r;
}

}  // namespace razor::train
