// train/fit.h -- the one training loop: epochs of steps over a DataLoader, with the progress line, the running
// sums, the non-finite policy, evaluation, the epoch record (stdout line, JSONL entry, SVG curves) and checkpoints.
// The step is plugged in (train/steps.h): the dense step (Back Razor is the save policy around it), the VR-PGE
// iteration, the fixed-subnetwork fine-tune. razor demo, train, finetune, sparse-train (both phases) run it; razor
// bench times the same steps.
//
// reference: ggml-opt's ggml_opt_fit (epochs over a dataset, a pluggable step, a progress line with ETA) and
// Keras' Model.fit callbacks; the step order is PyTorch's (zero_grad, forward, loss, backward, [clip], step, lr
// schedule). docs: docs/cli.md.
//
// For each epoch e = done + 1 .. epochs:
//   1. hooks.begin_epoch(e); loader.set_epoch(loader_epoch_offset + e - 1): the order and augmentation of an epoch
//      depend on (seed, epoch) only, which is what makes a resumed run bit-exact.
//   2. each step (at most steps_per_epoch): the tape measurement starts, NonFiniteGuard::begin_step, step.run(batch);
//      finite: step.update(), step.advance(), the running loss, accuracy and metrics, the progress line;
//      not finite: stop with a message naming the first non-finite op (NonFiniteGuard), or with skip_nonfinite and
//      a step that can be skipped, undo its side effects, step.advance() and go on.
//   3. evaluation when the schedule says (hooks.evaluate), the best test accuracy so far.
//   4. the record: hooks.line to stdout, hooks.record plus "curve" (the smoothed per-step samples,
//      train/step_curve.h) to the RunLog (JSONL and SVG curves), then hooks.checkpoint. The
//      checkpoint comes after everything else of the epoch: a run killed before it resumes from the previous epoch
//      and redoes this one identically (the RunLog trim drops its line), where another order would lose the line.
//   5. stop after epoch stop_at (0 = never), with its checkpoint.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/saved.h"
#include "core/tensor.h"
#include "data/batch.h"
#include "data/loader.h"
#include "nn/module.h"
#include "train/evaluate.h"
#include "train/run_log.h"
#include "train/step_curve.h"

namespace razor::train {

// What a step reports to the loop.
struct StepResult {
    double loss = 0;     // the batch's mean loss
    Tensor logits;       // (B, K): the running accuracy counts its argmax (undefined: the step has none)
    std::string fault;   // "" when the loss and gradients are finite, else what was not ("the loss became nan")
    std::vector<std::pair<std::string, double>> metrics;   // per-step figures the epoch averages ("flops_ratio")

    double metric(const std::string& name) const;   // 0 when the step did not report it
};

// One training step, plugged into fit().
class Step {
public:
    virtual ~Step() = default;
    // Forward, loss, backward (and clip) on the batch. When can_skip(), the parameters are not updated yet.
    virtual StepResult run(const data::Batch& batch) = 0;
    virtual void update() {}              // a finite step's parameter update (the optimizer steps)
    virtual void advance() {}             // per-iteration schedules: after every step, skipped ones too
    virtual double lr() const = 0;        // the lr this step uses
    // Whether a non-finite step can be skipped: run() leaves the parameters as they were. rerun() then repeats its
    // zero_grad, forward, loss and backward on the batch (the anomaly re-run that names the first non-finite op).
    virtual bool can_skip() const { return true; }
    virtual void rerun(const data::Batch& batch) {}
};

// One epoch as the loop measured it.
struct EpochSummary {
    int64_t epoch = 0, epochs = 0;
    int64_t step = 0;       // steps taken after this epoch (all epochs, skipped ones included)
    int64_t steps = 0;      // steps of this epoch (skipped ones included)
    int64_t skipped = 0;    // non-finite steps skipped (skip_nonfinite)
    // lr: the one the epoch's last step used. seconds: the training steps' wall time, evaluation excluded (that is
    // eval->seconds); img_per_s: training images / seconds (the same quantity in every command)
    double loss = 0, train_acc = 0, lr = 0, seconds = 0, img_per_s = 0;
    TapeTotals tape;                          // the largest per-step tape of the epoch
    std::optional<EvalResult> eval;           // when the epoch was evaluated
    bool best = false;                        // eval is the best test accuracy so far
    double best_acc = -1;                     // so far (-1: none yet)
    int64_t best_epoch = 0;
    std::map<std::string, double> metrics;    // StepResult::metrics averaged over the finite steps
    int64_t rss_bytes = 0, peak_rss_bytes = 0, peak_tensor_bytes = 0;
    std::vector<CurvePoint> curve;            // the smoothed per-step samples (the entry's "curve")

    double metric(const std::string& name) const;   // 0 when no step reported it
};

struct EvalSchedule {
    int64_t every = 1;       // after every N-th epoch (0 = not by count)
    bool last = true;        // after the last epoch
    bool at_stop = false;    // after the stop_at epoch
};

struct FitOptions {
    std::string command{};         // "razor train": prefixes every message
    std::string label = "epoch ";  // the progress label: LABEL e/E
    int64_t epochs = 1;            // the last epoch
    int64_t done = 0;              // epochs already done (a resumed run)
    int64_t loader_epoch_offset = 0;   // the loader epoch of epoch e is offset + e - 1
    int64_t steps_per_epoch = 0;   // 0: the whole loader
    int64_t batch = 1;             // images per step (the progress line's img/s)
    int64_t global_step = 0;       // steps taken before (a resumed run)
    bool skip_nonfinite = false;   // --skip-nonfinite
    EvalSchedule eval{};
    int64_t stop_at = 0;           // stop after this epoch (0 = never; the command leaves out the run's last)
    double best_acc = -1;          // a resumed run's best test accuracy so far
    int64_t best_epoch = 0;
    // For the stop message: OUT/last holds the run up to position offset + e - 1 (offset: the epochs of earlier
    // phases); "" = the command writes no checkpoint. checkpointed: a checkpoint exists before the first epoch.
    std::string out{};
    int64_t position_offset = 0;
    bool checkpointed = false;
};

struct FitHooks {
    std::function<void(int64_t epoch)> begin_epoch;   // optional
    std::function<EvalResult(int64_t epoch)> evaluate;   // required when the schedule evaluates
    // The progress line's tail after a finite step (default: the step's tape, stored vs dense)
    std::function<std::string(const StepResult&, const TapeTotals& step_tape)> progress;
    std::function<std::string(const EpochSummary&)> line;       // the stdout line (required)
    std::function<nlohmann::json(const EpochSummary&)> record;  // the JSONL entry (required)
    std::function<void(const EpochSummary&)> checkpoint;        // optional: after the record
};

struct FitResult {
    std::optional<EpochSummary> last;   // the last epoch run (none when there was nothing to do)
    TapeTotals tape;                    // the largest per-step tape of the run
    int64_t global_step = 0;
    double best_acc = -1;
    int64_t best_epoch = 0;
    bool stopped = false;               // at stop_at
};

// The loop described above, on `model` (whose buffers the non-finite policy restores when it skips).
FitResult fit(nn::Module& model, data::DataLoader& loader, Step& step, RunLog& log, const FitOptions& options,
              const FitHooks& hooks);

// The default progress tail: "tape 1.2 MiB (dense 4.8 MiB, 4.0x)".
std::string tape_text(const TapeTotals& tape);

}  // namespace razor::train
