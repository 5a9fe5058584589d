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
// For each epoch e = start.epoch + 1 .. epochs:
//   1. hooks.begin_epoch(e); loader.set_epoch(loader_epoch_offset + e - 1): the order and augmentation of an epoch
//      depend on (seed, epoch) only, which is what makes a resumed run bit-exact. The first epoch of a run resumed
//      mid-epoch starts at batch start.partial.steps with the running sums the checkpoint kept (train/fit_position.h).
//   2. each step (at most steps_per_epoch): the tape measurement starts, NonFiniteGuard::begin_step, step.run(batch);
//      finite: step.update(), step.advance(), the running loss, accuracy and metrics, the progress line;
//      not finite: stop with a message naming the first non-finite op (NonFiniteGuard), or with skip_nonfinite and
//      a step that can be skipped, undo its side effects, step.advance() and go on.
//      Every save_every global steps inside the epoch: a checkpoint OUT/last at that step.
//   3. evaluation when the schedule says (hooks.evaluate), the best test accuracy so far.
//   4. the record: hooks.line to stdout, hooks.record plus "curve" (the smoothed per-step samples,
//      train/step_curve.h) to the RunLog (JSONL and SVG curves), then the checkpoint (OUT/best when save_best and
//      this epoch is the best so far, then OUT/last). The checkpoint comes after everything else of the epoch: a run
//      killed before it resumes from the previous checkpoint and redoes the rest identically (the RunLog trim drops
//      the line), where another order would lose the line.
//   5. stop after epoch stop_at (0 = never), with its checkpoint.
// A checkpoint is hooks.state(position) -- the command's weights, optimizer, schedule and RNG states -- plus the
// loop's own fit.* entries (fit_position.h), written atomically by save_checkpoint (train/checkpoint.h).
//
// Interrupts (train/interrupt.h): a SIGINT or SIGTERM lets the step in flight finish; then, before the next step
// (or after the epoch's record when it arrived during evaluation), OUT/last is written at that position unless it
// already holds it, and fit() throws Interrupted, whose message says how to continue (COMMAND --resume OUT).
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
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/fit_position.h"
#include "train/interrupt.h"
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
    std::string eval_split = "test";          // what eval scored (FitOptions::eval_split)
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
    FitPosition start{};           // where the run stands (a resumed run: what its checkpoint says)
    int64_t loader_epoch_offset = 0;   // the loader epoch of epoch e is offset + e - 1
    int64_t steps_per_epoch = 0;   // 0: the whole loader
    int64_t batch = 1;             // images per step (the progress line's img/s)
    bool skip_nonfinite = false;   // --skip-nonfinite
    EvalSchedule eval{};
    // The split hooks.evaluate scores, "val" or "test": the epoch line's label and the log's eval_split. best/ is
    // chosen on it, so a run with a validation split never selects on test.
    std::string eval_split = "test";
    int64_t stop_at = 0;           // stop after this epoch (0 = never; the command leaves out the run's last)
    // Checkpoints go to OUT/last (and OUT/best with save_best) when `out` is set and hooks.state is given; "" = the
    // command writes its outputs itself, at the end. save_every: also every N global steps inside an epoch (0 = at
    // epoch ends only). checkpointed: a checkpoint of `start` exists already (a resumed run, a later phase).
    std::string out{};
    int64_t save_every = 0;
    bool save_best = false;
    bool checkpointed = false;
    // For messages: OUT/last's epoch is position_offset + the epochs of this fit (the epochs of earlier phases).
    int64_t position_offset = 0;
    const Interrupts* interrupts = nullptr;   // acted on between steps; null: signals keep their default action
};

struct FitHooks {
    std::function<void(int64_t epoch)> begin_epoch;   // optional
    std::function<EvalResult(int64_t epoch)> evaluate;   // required when the schedule evaluates
    // The progress line's tail after a finite step (default: the step's tape, stored vs dense)
    std::function<std::string(const StepResult&, const TapeTotals& step_tape)> progress;
    std::function<std::string(const EpochSummary&)> line;       // the stdout line (required)
    std::function<nlohmann::json(const EpochSummary&)> record;  // the JSONL entry (required)
    // The command's checkpoint at `position` (weights, metadata, optimizer, schedule, RNG states; the command's own
    // epoch/step entries from `position`); fit() adds the fit.* entries and writes it. Required when FitOptions::out
    // is set.
    std::function<Checkpoint(const FitPosition& position)> state;
    std::function<void(const FitPosition& position)> saved;   // optional: after each checkpoint written
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
