// optim/scheduler.h -- learning-rate schedulers: StepLR, MultiStepLR, CosineAnnealingLR, LinearWarmup, OneCycleLR.
//
// reference: torch.optim.lr_scheduler (PyTorch 1.13). docs: docs/optim.md.
//
// Every scheduler here is a closed form: after t = last_epoch() calls of step(), group g's lr is lr_at(t, g),
// a function of t and that group's base lr (the lr the group had when the scheduler was built). PyTorch's
// step() uses "chainable" recursive forms of the same formulas; they agree to rounding (below 1e-15) as long
// as nothing else writes the lr between steps -- here an lr set by hand is overwritten at the next step().
//
// Use as PyTorch: build the scheduler after the optimizer (that applies lr_at(0)), call opt.step() then
// sched.step() once per iteration (or per epoch). state_dict() holds the position ("last_epoch", one i64) and the
// base lrs ("base_lrs.<g>", pack_f64); load_state_dict() restores them and re-applies the lr (and momentum) of
// that position, so the order in which optimizer and scheduler are restored does not matter.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace razor::optim {

class LRScheduler {
public:
    virtual ~LRScheduler() = default;
    LRScheduler(const LRScheduler&) = delete;
    LRScheduler& operator=(const LRScheduler&) = delete;

    void step();                                                     // t += 1, then every group's lr = lr_at(t, g)
    const std::vector<double>& get_last_lr() const { return last_lr_; }   // one per group, after the last step
    int64_t last_epoch() const { return last_epoch_; }               // t: steps taken since construction
    const std::vector<double>& base_lrs() const { return base_lrs_; }
    virtual const char* type_name() const = 0;

    // The closed form: group `group`'s lr after `epoch` steps.
    virtual double lr_at(int64_t epoch, size_t group) const = 0;

    virtual std::map<std::string, Tensor> state_dict() const;
    virtual void load_state_dict(const std::map<std::string, Tensor>& state);

protected:
    explicit LRScheduler(Optimizer& optimizer);   // base lrs = the optimizer's current lrs
    // Derived constructors call this last (virtual lr_at is theirs by then): position 0, lr_at(0) applied.
    void initial_step() { set_position(0); }
    // Writes the optimizer's values for position `epoch` (every group's lr; OneCycleLR also the momentum).
    virtual void apply(int64_t epoch);
    void set_position(int64_t epoch);   // apply, then record the position and the lrs
    void check_groups() const;
    // Throws when `epoch` is not a position this scheduler can take (OneCycleLR: past total_steps).
    virtual void check_position(int64_t epoch) const {}

    // load_state_dict in two halves, so that nothing changes when any part of a state is bad.
    struct Position {
        int64_t epoch;
        std::vector<double> base_lrs;
    };
    Position parse_state(const std::map<std::string, Tensor>& state) const;   // validates; throws
    void restore(const Position& position);                                  // does not throw

    Optimizer& optimizer_;
    std::vector<double> base_lrs_;
    int64_t last_epoch_ = -1;
    std::vector<double> last_lr_;

    friend class LinearWarmup;   // drives the scheduler it hands over to
};

// lr = base_lr * gamma^floor(t / step_size).                                  reference: torch.optim.lr_scheduler.StepLR
class StepLR : public LRScheduler {
public:
    StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
    const char* type_name() const override { return "StepLR"; }
    double lr_at(int64_t epoch, size_t group) const override;

private:
    int64_t step_size_;
    double gamma_;
};

// lr = base_lr * gamma^(number of milestones <= t); a repeated milestone counts twice.   reference: MultiStepLR
class MultiStepLR : public LRScheduler {
public:
    MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
    const char* type_name() const override { return "MultiStepLR"; }
    double lr_at(int64_t epoch, size_t group) const override;

private:
    std::vector<int64_t> milestones_;   // sorted
    double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2; past T_max the cosine rises again
// (period 2 T_max), as PyTorch's.                                      reference: CosineAnnealingLR (_get_closed_form_lr)
class CosineAnnealingLR : public LRScheduler {
public:
    CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);
    const char* type_name() const override { return "CosineAnnealingLR"; }
    double lr_at(int64_t epoch, size_t group) const override;

private:
    int64_t T_max_;
    double eta_min_;
};

// Linear warmup, then another scheduler (or the base lr):
//   t <  warmup_steps:  lr = base_lr * (start_factor + (1 - start_factor) * t / warmup_steps)
//   t >= warmup_steps:  lr = after.lr_at(t - warmup_steps)   (base_lr when there is no `after`)
// reference: LinearLR(start_factor, end_factor=1, total_iters=warmup_steps) followed, through
// SequentialLR(milestones=[warmup_steps]), by `after`. Build `after` first on the same optimizer (its base lrs are
// the ones used), e.g. LinearWarmup(opt, 5, 0.1, std::make_unique<CosineAnnealingLR>(opt, 95)).
class LinearWarmup : public LRScheduler {
public:
    LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor = 1.0 / 3,
                 std::unique_ptr<LRScheduler> after = nullptr);
    const char* type_name() const override { return "LinearWarmup"; }
    double lr_at(int64_t epoch, size_t group) const override;
    const LRScheduler* after() const { return after_.get(); }

    std::map<std::string, Tensor> state_dict() const override;   // adds "after.<key>" for the handed-over scheduler
    void load_state_dict(const std::map<std::string, Tensor>& state) override;

protected:
    void apply(int64_t epoch) override;
    void check_position(int64_t epoch) const override;

private:
    int64_t warmup_steps_;
    double start_factor_;
    std::unique_ptr<LRScheduler> after_;
};

enum class AnnealStrategy { Cos, Linear };

// PyTorch's OneCycleLR defaults; max_lr holds one value per group, or one for all groups.
struct OneCycleOptions {
    std::vector<double> max_lr;
    int64_t total_steps = 0;
    double pct_start = 0.3;
    AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
    bool cycle_momentum = true;         // SGD's momentum or Adam's beta1, cycled opposite to the lr
    double base_momentum = 0.85;
    double max_momentum = 0.95;
    double div_factor = 25;             // initial_lr = max_lr / div_factor
    double final_div_factor = 1e4;      // min_lr = initial_lr / final_div_factor
    bool three_phase = false;
};

// One cycle (reference: torch.optim.lr_scheduler.OneCycleLR). Phases, in steps, with anneal(a, b, pct) =
// b + (a - b) / 2 * (cos(pi * pct) + 1) (Cos) or (b - a) * pct + a (Linear), pct = (t - start) / (end - start):
//   two phases:   [0, pct_start*T - 1]: initial_lr -> max_lr,   momentum max -> base
//                 [.., T - 1]:          max_lr -> min_lr,       momentum base -> max
//   three_phase:  [0, pct_start*T - 1]: initial -> max;  [.., 2 pct_start*T - 2]: max -> initial;
//                 [.., T - 1]: initial -> min_lr (momentum max -> base -> max -> max)
// The base lrs are the initial lrs (max_lr / div_factor); stepping past t = total_steps throws, as PyTorch.
class OneCycleLR : public LRScheduler {
public:
    OneCycleLR(Optimizer& optimizer, OneCycleOptions options);
    const char* type_name() const override { return "OneCycleLR"; }
    double lr_at(int64_t epoch, size_t group) const override;
    double momentum_at(int64_t epoch) const;   // the cycled momentum (the same for every group)
    const OneCycleOptions& options() const { return options_; }

protected:
    void apply(int64_t epoch) override;
    void check_position(int64_t epoch) const override;

private:
    enum Lr { kInitial, kMax, kMin };
    enum Momentum { kBase, kMaxMomentum };
    struct Phase {
        double end_step;            // the last step of the phase (PyTorch's float arithmetic)
        Lr start_lr, end_lr;
        Momentum start_momentum, end_momentum;
    };
    // The phase holding `epoch` and how far into it (pct), as PyTorch's get_lr walks its phases.
    std::pair<const Phase*, double> locate(int64_t epoch) const;
    double anneal(double start, double end, double pct) const;
    double lr_of(Lr which, size_t group) const;

    OneCycleOptions options_;
    std::vector<double> max_lrs_, min_lrs_;
    std::vector<Phase> phases_;
};

// The options of a one-cycle run of any length. PyTorch's phases divide by their length, so a cycle whose
// pct_start * total_steps is at most 1 (3 steps at 0.3: the rising phase would end at step -0.1) or at least
// total_steps - 1 has an empty phase, and OneCycleLR refuses it as PyTorch does. This returns `options` unchanged
// whenever OneCycleLR accepts them (every run of more than a few steps: the schedule is PyTorch's), else:
//   pct_start := the middle of the range where every phase is non-empty, (1/T, 1) for two phases and
//                (1/T, (T + 1) / (2T)) for three: 3 steps -> 2/3 (initial, max, min lr, one step each);
//   total_steps 1 := 2 (no cycle fits in one step; the run's one step takes the initial lr, max_lr / div_factor).
// razor train/finetune use it, so --epochs 1 --steps-per-epoch 3 trains; docs/optim.md "Short runs".
OneCycleOptions one_cycle_for_any_length(OneCycleOptions options);

}  // namespace razor::optim
