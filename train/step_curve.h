// train/step_curve.h -- the per-step half of a run's curves: the training loss and accuracy smoothed over steps
// (an exponential moving average, bias-corrected as Adam's moments so the first steps are not pulled to 0) and the
// lr, sampled at most kCurvePoints times an epoch. The loop (train/fit.h) adds every finite step; the epoch's
// samples go into its JSONL entry as "curve" (docs/cli.md "Log"), which the SVG curves (train/run_log.h) draw, so a
// one-epoch fine-tune still has a loss and an lr curve, and a resumed run redraws the steps its log kept.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace razor::train {

constexpr int64_t kCurvePoints = 100;   // samples per epoch, at most
constexpr double kCurveBeta = 0.9;      // EMA decay: about the last 10 steps

struct CurvePoint {
    double at = 0;        // fraction of the epoch done after it, in (0, 1]
    double loss = 0;      // smoothed training loss
    double accuracy = 0;  // smoothed training accuracy in [0, 1] (NaN: the step reports no logits)
    double lr = 0;        // the lr this step used
};

// Everything a StepCurve holds: the averages and the epoch's samples so far (a mid-epoch checkpoint keeps it,
// train/fit_position.h, so a run resumed inside an epoch logs the curve of one never stopped).
struct StepCurveState {
    double loss_avg = 0, acc_avg = 0, decay = 1;   // decay = beta^t for the bias correction
    std::vector<CurvePoint> points;
};

class StepCurve {
public:
    StepCurve() = default;
    explicit StepCurve(StepCurveState state) : s_(std::move(state)) {}
    const StepCurveState& state() const { return s_; }
    // Adds a finite step: `k` of `steps` steps of the epoch, its batch's mean loss and accuracy, and its lr. Keeps a
    // sample every ceil(steps / kCurvePoints) steps and at the epoch's last step.
    void add(int64_t k, int64_t steps, double loss, double accuracy, double lr);
    // The samples since the last take() (one epoch's), and the averages start afresh: an epoch's curve depends on
    // its own steps only, so a run resumed at an epoch boundary logs the same curve as one never interrupted.
    std::vector<CurvePoint> take();

private:
    StepCurveState s_;
};

// {"at": [...], "loss": [...], "acc": [...] (null where NaN), "lr": [...]}: positions within the entry's epoch, so
// the same in a resumed run (whose phases may count global steps from its resume point)
nlohmann::json curve_json(const std::vector<CurvePoint>& points);
// The inverse; an entry without a (well-formed) "curve" gives none.
std::vector<CurvePoint> curve_from_json(const nlohmann::json& entry);

}  // namespace razor::train
