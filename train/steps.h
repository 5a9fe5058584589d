// train/steps.h -- the steps fit() runs (train/fit.h): the dense step and the VR-PGE iteration. The fixed-subnet
// fine-tune of razor sparse-train phase B is the dense step with the model on a subnetwork (train/subnet.h:
// SubnetScope); Back Razor is the dense step under a save policy (SavePolicyGuard), not a step of its own.
//
// reference: a PyTorch training step, opt.zero_grad(); loss = F.cross_entropy(model(x), y, label_smoothing);
// loss.backward(); [clip_grad_norm_]; opt.step(); sched.step(). docs: docs/cli.md, docs/vr-pge.md.
#pragma once

#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/scheduler.h"
#include "train/fit.h"
#include "train/vrpge_trainer.h"

namespace razor::train {

struct DenseStepOptions {
    float label_smoothing = 0;   // cross-entropy label smoothing in [0, 1)
    double clip = 0;             // gradient-norm clip over the optimizer's parameters (0 = off)
    // --step-in-backward: each parameter is updated (and its gradient freed) inside backward as soon as its gradient
    // is complete (optim/step_in_backward.h). The same updates; not with clip, and the step cannot be skipped.
    bool step_in_backward = false;
};

// zero_grad, forward, loss, backward, [clip] in run(); the optimizer step in update(); the scheduler (optional) in
// advance(). A non-finite loss, clipped gradient norm or (without clip) gradient is reported as the step's fault,
// before the optimizer saw it. With step_in_backward the optimizer steps inside run()'s backward and update() does
// nothing; a non-finite gradient is the fault of a step that already updated the parameters before it.
class DenseStep : public Step {
public:
    DenseStep(nn::Module& model, optim::Optimizer& opt, optim::LRScheduler* sched, DenseStepOptions options);
    StepResult run(const data::Batch& batch) override;
    void update() override;
    void advance() override;
    double lr() const override;
    void rerun(const data::Batch& batch) override;
    bool can_skip() const override { return !options_.step_in_backward; }

private:
    nn::Module& model_;
    optim::Optimizer& opt_;
    optim::LRScheduler* sched_;
    DenseStepOptions options_;
};

// One VR-PGE phase-A step (VrpgeTrainer::step): the reference iteration (both sampled passes, the estimator, the
// joint clip, Adam on s, SGD on w, the projection), or with --resample-every N > 1 between resamples the w-only step
// on the interval's mask. It updates the parameters itself, so a non-finite one cannot be skipped. Metrics:
// flops_ratio (the sampled subnets' MACs over dense, per pass), grad_norm (before the clip: the joint norm, or w's
// between resamples), s_grad_norm (s.grad's alone; 0 between resamples), clipped (1 when the clip bound),
// resampled (1 when the step ran the reference iteration).
class VrpgeStep : public Step {
public:
    VrpgeStep(VrpgeTrainer& trainer, Generator& masks) : trainer_(trainer), masks_(masks) {}
    StepResult run(const data::Batch& batch) override;
    double lr() const override { return trainer_.opt_w.lr(); }
    bool can_skip() const override { return false; }

private:
    VrpgeTrainer& trainer_;
    Generator& masks_;
};

}  // namespace razor::train
