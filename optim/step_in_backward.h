// optim/step_in_backward.h -- the optimizer step fused into backward: each parameter is updated as soon as its
// gradient is complete, and that gradient is dropped at once, so a step never holds every gradient together.
//
// reference: PyTorch's "optimizer step in backward" recipe (Tensor.register_post_accumulate_grad_hook, one
// optimizer step per parameter in the hook, then p.grad = None); torchtune's optimizer_in_bwd. docs: docs/optim.md
// "The step in backward".
//
// Why: a plain step keeps every parameter's gradient until opt.step() runs after backward. For a fine-tune whose
// activations Back Razor has shrunk, that is often the largest transient left: vit_b_16's gradients are 330 MiB,
// as large as its weights. Here the gradient of the last layer is applied and freed before the walk reaches the
// first, so at most the gradients of the layers backward is working on are alive.
//
// Same result: each parameter gets exactly the update step() would give it (the same kernel, options and state),
// because nothing in an SGD or Adam update depends on another parameter's gradient. Not for anything that needs
// every gradient before the step: gradient clipping by the global norm, accumulation over several backwards, or
// skipping a step whose gradients are not finite (the updates before the bad gradient are already applied).
//
//     optim::StepInBackward fused(opt);   // hooks on every trained parameter of opt
//     loss.backward();                    // updates the parameters; no opt.step(), nothing left in p.grad()
//     if (!fused.nonfinite().empty()) ... // a gradient that was not finite: that parameter was not updated
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace razor::optim {

class StepInBackward {
public:
    // Registers a post-accumulate-grad hook on each of opt's parameters that requires grad; they stay until the
    // object is destroyed. The hook checks the gradient is finite, runs opt.step_parameter and drops the gradient.
    explicit StepInBackward(Optimizer& opt);
    ~StepInBackward();
    StepInBackward(const StepInBackward&) = delete;
    StepInBackward& operator=(const StepInBackward&) = delete;

    // The first parameter (state_dict name) whose gradient held a NaN or Inf in a backward under this object, empty
    // if none. That parameter and every one after it in the walk were left as they were.
    const std::string& nonfinite() const { return nonfinite_; }
    int64_t updated() const { return updated_; }   // parameter updates made so far

private:
    struct Hooked {
        Tensor param;
        uint64_t id;
    };
    std::vector<Hooked> hooks_;
    std::string nonfinite_;
    int64_t updated_ = 0;
};

}  // namespace razor::optim
