// train/nonfinite.h -- what a training command does when a step's loss or gradients are not finite: name the op
// that produced the first NaN/Inf, then stop cleanly or (--skip-nonfinite) skip the step.
//
// reference: torch.autograd.detect_anomaly for the attribution, torch.cuda.amp.GradScaler for skipping a step
// (the optimizer does not step, the lr schedule does). docs: docs/reliability.md "Numerical faults".
//
// Normal steps pay only begin_step(): an RNG state copy (4 words) and, when skipping is on, a copy of the model's
// buffers (BN running statistics: a few KiB). On a fault, on_nonfinite() re-runs the same batch once under
// AnomalyMode (core/anomaly.h) with the RNG rewound, so dropout draws the same masks. The re-run updates BN running
// statistics a second time; that does not change what it computes (training-mode BN normalises with the batch's own
// statistics), and when the step is skipped the buffers are restored to their values before the step (undoing the
// faulty step's update and the re-run's), the RNG is put where the faulty step left it, and the gradients dropped.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace razor::train {

struct NonFiniteOptions {
    bool skip = false;                    // --skip-nonfinite
    int64_t max_consecutive_skips = 20;   // then give up with an error
};

class NonFiniteGuard {
public:
    NonFiniteGuard(nn::Module& model, NonFiniteOptions options);

    // Call before each step's forward.
    void begin_step();
    // Call after a step that was finite (resets the run of consecutive skips).
    void step_ok() { consecutive_ = 0; }

    // Call when the step went non-finite. `what`: "razor train: the loss became nan"; `where`: "at epoch 3 step 5/10
    // (...)"; `stopped`: what is intact when the run stops ("the last checkpoint (runs/x/last, epoch 2) is
    // intact"). `forward_backward` runs the step's zero_grad, forward, loss and backward again (no optimizer step).
    // Without skipping: throws razor::Error naming the first non-finite op and module, `stopped`, and a hint.
    // With skipping: prints the same report to stderr, undoes the step's side effects and returns; throws after
    // max_consecutive_skips faulty steps in a row.
    void on_nonfinite(const std::string& what, const std::string& where, const std::string& stopped,
                      const std::function<void()>& forward_backward);

    int64_t skipped() const { return skipped_; }   // skipped steps since construction

private:
    nn::Module& model_;
    NonFiniteOptions options_;
    std::array<uint64_t, 4> rng_before_{};
    std::vector<Tensor> buffers_before_;   // clones of model_.named_buffers(), in order (skip mode only)
    int64_t consecutive_ = 0, skipped_ = 0;
};

}  // namespace razor::train
