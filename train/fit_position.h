// train/fit_position.h -- where fit() (train/fit.h) stands, as a checkpoint keeps it: the epochs and steps done, the
// best test accuracy so far and, for a checkpoint taken inside an epoch (--save-every, an interrupt), the epoch's
// running sums, so that the resumed epoch ends with the same loss, accuracy and metrics as one never stopped.
//
// reference: the loop half of a PyTorch resume block (start_epoch, global_step, best_acc) plus what torchdata's
// StatefulDataLoader adds for mid-epoch resumption (the batches of the epoch already consumed), and the per-step
// curve's smoothing state (train/step_curve.h). docs: docs/cli.md
// "Checkpoints".
//
// In train_state.safetensors the epoch's running sums are the "fit.*" entries (fit.steps = 0 at an epoch boundary,
// and in checkpoints written before mid-epoch checkpoints existed, where the entries are absent). The epochs and
// steps done and the best accuracy are the command's own entries ("epoch", "step", "best_test_acc" in razor train's;
// razor sparse-train keeps one pair per phase), which the command writes from FitPosition.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/tape.h"
#include "core/tensor.h"
#include "train/step_curve.h"

namespace razor::train {

// The running sums of the epoch in progress.
struct EpochProgress {
    int64_t steps = 0;       // steps of the epoch taken (skipped ones included); 0 at an epoch boundary
    int64_t skipped = 0;     // non-finite steps skipped
    int64_t finite = 0;      // steps that updated the parameters
    int64_t seen = 0;        // images of the finite steps
    int64_t correct = 0;     // of them, predicted right
    double loss_sum = 0;     // sum over finite steps of loss x batch size
    double seconds = 0;      // training time of the epoch so far (evaluation excluded)
    TapeTotals tape;         // the largest per-step tape so far
    std::map<std::string, double> metric_sums;   // StepResult::metrics summed over the finite steps
    StepCurve curve;         // the smoothed per-step samples of the epoch so far
};

// Where a run stands in fit(): after `epoch` whole epochs and `global_step` steps, `partial` into the next epoch.
struct FitPosition {
    int64_t epoch = 0;
    int64_t global_step = 0;
    double best_acc = -1;        // the best test accuracy so far (-1: none evaluated yet)
    int64_t best_epoch = 0;
    EpochProgress partial;
};

// Writes `p` as the fit.* entries of a train state.
void pack_epoch_progress(const EpochProgress& p, std::map<std::string, Tensor>& state);

// Reads the fit.* entries back (none: an epoch boundary). Every entry is checked: steps in [0, steps_per_epoch),
// counts consistent (skipped + finite = steps, correct <= seen), sums finite and non-negative, the curve's samples
// inside the epoch. Errors name `where`,
// the entry, what was expected and what was found.
EpochProgress read_epoch_progress(const std::map<std::string, Tensor>& state, const std::string& where,
                                  int64_t steps_per_epoch);

}  // namespace razor::train
