// optim/scheduler.cpp -- see scheduler.h.
#include "optim/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace razor::optim {

// ---------------------------------------------------------------- LRScheduler

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lrs_(optimizer.lrs()) {}

void LRScheduler::check_groups() const {
    if (base_lrs_.size() != optimizer_.num_groups())
        throw Error(fmt(type_name(), ": built for ", base_lrs_.size(), " parameter groups but the optimizer now has ",
                        optimizer_.num_groups(), "; hint: add parameter groups before building the scheduler"));
}

void LRScheduler::apply(int64_t epoch) {
    for (size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_lr(g, lr_at(epoch, g));
}

void LRScheduler::set_position(int64_t epoch) {
    check_groups();
    apply(epoch);   // may throw (OneCycleLR past its end): then the position stays where it was
    last_epoch_ = epoch;
    last_lr_ = optimizer_.lrs();
}

void LRScheduler::step() { set_position(last_epoch_ + 1); }

std::map<std::string, Tensor> LRScheduler::state_dict() const {
    std::map<std::string, Tensor> out;
    Tensor epoch = Tensor::zeros({}, DType::I64);
    epoch.i64()[0] = last_epoch_;
    out.emplace("last_epoch", epoch);
    for (size_t g = 0; g < base_lrs_.size(); ++g) out.emplace(fmt("base_lrs.", g), pack_f64(base_lrs_[g]));
    return out;
}

LRScheduler::Position LRScheduler::parse_state(const std::map<std::string, Tensor>& state) const {
    const std::string where = fmt(type_name(), ".load_state_dict");
    Position position{-1, base_lrs_};
    for (const auto& [key, t] : state) {
        if (key == "last_epoch") {
            if (!t.defined() || t.dtype() != DType::I64 || t.numel() != 1)
                throw Error(fmt(where, ": 'last_epoch' must be one i64; hint: the state was not written by a razor "
                                       "scheduler"));
            position.epoch = t.contiguous().i64()[0];
        } else if (key.rfind("base_lrs.", 0) == 0) {
            const std::string index = key.substr(9);
            const bool digits = !index.empty() && index.size() < 10 &&
                                std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
            const size_t g = digits ? std::stoul(index) : position.base_lrs.size();
            if (g >= position.base_lrs.size())
                throw Error(fmt(where, ": '", key, "' names no parameter group (the optimizer has ",
                                position.base_lrs.size(), "); hint: build the optimizer with the checkpoint's groups"));
            position.base_lrs[g] = unpack_f64(t, key);
        } else {
            throw Error(fmt(where, ": unknown key '", key, "'; hint: the state belongs to another scheduler"));
        }
    }
    if (position.epoch < 0)
        throw Error(fmt(where, ": 'last_epoch' is missing or negative; hint: pass what state_dict() returned"));
    if (position.epoch > (int64_t{1} << 53))   // step() adds 1: no overflow, and no position a run can reach
        throw Error(fmt(where, ": 'last_epoch' must be at most 2^53, got ", position.epoch,
                        "; hint: the state is corrupt"));
    check_groups();
    check_position(position.epoch);
    return position;
}

void LRScheduler::restore(const Position& position) {
    base_lrs_ = position.base_lrs;
    set_position(position.epoch);
}

void LRScheduler::load_state_dict(const std::map<std::string, Tensor>& state) { restore(parse_state(state)); }

// ---------------------------------------------------------------- StepLR, MultiStepLR, CosineAnnealingLR

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
    if (step_size <= 0)
        throw Error(fmt("StepLR: step_size must be > 0, got ", step_size, "; hint: the lr decays every step_size steps"));
    initial_step();
}

double StepLR::lr_at(int64_t epoch, size_t group) const {
    return base_lrs_[group] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
    std::sort(milestones_.begin(), milestones_.end());
    initial_step();
}

double MultiStepLR::lr_at(int64_t epoch, size_t group) const {
    const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();  // bisect_right
    return base_lrs_[group] * std::pow(gamma_, static_cast<double>(passed));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
    if (T_max <= 0)
        throw Error(fmt("CosineAnnealingLR: T_max must be > 0, got ", T_max, "; hint: the number of steps to anneal over"));
    initial_step();
}

double CosineAnnealingLR::lr_at(int64_t epoch, size_t group) const {
    // Same operation order as PyTorch's _get_closed_form_lr.
    const double cos_term = 1 + std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(T_max_));
    return eta_min_ + (base_lrs_[group] - eta_min_) * cos_term / 2;
}

// ---------------------------------------------------------------- LinearWarmup

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor,
                           std::unique_ptr<LRScheduler> after)
    : LRScheduler(optimizer), warmup_steps_(warmup_steps), start_factor_(start_factor), after_(std::move(after)) {
    if (warmup_steps < 0)
        throw Error(fmt("LinearWarmup: warmup_steps must be >= 0, got ", warmup_steps));
    if (!(start_factor >= 0 && start_factor <= 1))
        throw Error(fmt("LinearWarmup: start_factor must be in [0, 1], got ", start_factor,
                        "; hint: the first lr is start_factor * base lr"));
    if (after_) {
        if (&after_->optimizer_ != &optimizer)
            throw Error("LinearWarmup: the scheduler to hand over to drives another optimizer; hint: build both on "
                        "the same optimizer");
        base_lrs_ = after_->base_lrs();   // it was built first, from the lrs before the warmup touched them
    }
    initial_step();
}

double LinearWarmup::lr_at(int64_t epoch, size_t group) const {
    if (epoch < warmup_steps_)   // PyTorch's LinearLR closed form with end_factor 1
        return base_lrs_[group] * (start_factor_ + (1 - start_factor_) * static_cast<double>(epoch) /
                                                       static_cast<double>(warmup_steps_));
    return after_ ? after_->lr_at(epoch - warmup_steps_, group) : base_lrs_[group];
}

void LinearWarmup::apply(int64_t epoch) {
    if (after_ && epoch >= warmup_steps_) {
        after_->set_position(epoch - warmup_steps_);   // the handed-over scheduler counts from 0 (SequentialLR)
        return;
    }
    LRScheduler::apply(epoch);
}

std::map<std::string, Tensor> LinearWarmup::state_dict() const {
    std::map<std::string, Tensor> out = LRScheduler::state_dict();
    if (after_)
        for (auto& [key, t] : after_->state_dict()) out.emplace("after." + key, t);
    return out;
}

void LinearWarmup::load_state_dict(const std::map<std::string, Tensor>& state) {
    std::map<std::string, Tensor> own, inner;
    for (const auto& [key, t] : state) (key.rfind("after.", 0) == 0 ? inner[key.substr(6)] : own[key]) = t;
    if (!inner.empty() && !after_)
        throw Error("LinearWarmup.load_state_dict: the state has 'after.*' keys but this warmup hands over to no "
                    "scheduler; hint: build it with the same `after` scheduler as the checkpoint's");
    const Position mine = parse_state(own);
    if (after_) after_->restore(after_->parse_state(inner));   // first: our position's values are the ones left
    restore(mine);
}

void LinearWarmup::check_position(int64_t epoch) const {
    if (after_ && epoch >= warmup_steps_) after_->check_position(epoch - warmup_steps_);
}

// ---------------------------------------------------------------- OneCycleLR

OneCycleLR::OneCycleLR(Optimizer& optimizer, OneCycleOptions options) : LRScheduler(optimizer), options_(options) {
    const OneCycleOptions& o = options_;
    const size_t groups = optimizer.num_groups();
    if (o.total_steps <= 0)
        throw Error(fmt("OneCycleLR: total_steps must be > 0, got ", o.total_steps,
                        "; hint: epochs * steps_per_epoch"));
    if (o.max_lr.size() != 1 && o.max_lr.size() != groups)
        throw Error(fmt("OneCycleLR: expected 1 or ", groups, " values for max_lr (one per group), got ",
                        o.max_lr.size()));
    if (!(o.pct_start >= 0 && o.pct_start <= 1))
        throw Error(fmt("OneCycleLR: pct_start must be in [0, 1], got ", o.pct_start));
    if (!(o.div_factor > 0) || !(o.final_div_factor > 0))
        throw Error(fmt("OneCycleLR: div_factor and final_div_factor must be > 0, got ", o.div_factor, " and ",
                        o.final_div_factor));
    if (o.cycle_momentum && !*optimizer.momentum_option())
        throw Error(fmt("OneCycleLR: ", optimizer.type_name(), " has no momentum to cycle; hint: set "
                        "cycle_momentum = false"));
    const double T = static_cast<double>(o.total_steps);
    if (o.three_phase)
        phases_ = {{o.pct_start * T - 1, kInitial, kMax, kMaxMomentum, kBase},
                   {2 * o.pct_start * T - 2, kMax, kInitial, kBase, kMaxMomentum},
                   {T - 1, kInitial, kMin, kMaxMomentum, kMaxMomentum}};
    else
        phases_ = {{o.pct_start * T - 1, kInitial, kMax, kMaxMomentum, kBase},
                   {T - 1, kMax, kMin, kBase, kMaxMomentum}};
    // Every phase needs a positive length, or pct divides by zero (PyTorch raises ZeroDivisionError then).
    double start = 0;
    for (const Phase& p : phases_) {
        if (!(p.end_step > start))
            throw Error(fmt("OneCycleLR: a phase is empty or negative with total_steps ", o.total_steps,
                            " and pct_start ", o.pct_start, "; hint: pct_start * total_steps must be > 1",
                            o.three_phase ? " (and the three phases need total_steps > 2 * pct_start * total_steps)" : ""));
        start = p.end_step;
    }
    for (size_t g = 0; g < groups; ++g) {
        const double max_lr = o.max_lr.size() == 1 ? o.max_lr[0] : o.max_lr[g];
        if (!(max_lr >= 0)) throw Error(fmt("OneCycleLR: max_lr must be >= 0, got ", max_lr));
        max_lrs_.push_back(max_lr);
        base_lrs_[g] = max_lr / o.div_factor;              // PyTorch's group['initial_lr']
        min_lrs_.push_back(base_lrs_[g] / o.final_div_factor);
    }
    initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
    if (options_.anneal_strategy == AnnealStrategy::Cos) {
        const double cos_out = std::cos(std::numbers::pi * pct) + 1;
        return end + (start - end) / 2.0 * cos_out;
    }
    return (end - start) * pct + start;
}

void OneCycleLR::check_position(int64_t epoch) const {
    if (epoch > options_.total_steps)   // t == total_steps is allowed: a loop's last sched.step() lands there
        throw Error(fmt("OneCycleLR: tried to step ", epoch + 1, " times; total_steps is ", options_.total_steps,
                        "; hint: total_steps = epochs * steps_per_epoch (one scheduler step per batch)"));
}

std::pair<const OneCycleLR::Phase*, double> OneCycleLR::locate(int64_t epoch) const {
    check_position(epoch);
    const double t = static_cast<double>(epoch);
    double start = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
        const Phase& p = phases_[i];
        if (t <= p.end_step || i + 1 == phases_.size()) return {&p, (t - start) / (p.end_step - start)};
        start = p.end_step;
    }
    RAZOR_CHECK(false) << "OneCycleLR has no phases";
    return {nullptr, 0};
}

double OneCycleLR::lr_of(Lr which, size_t group) const {
    return which == kInitial ? base_lrs_[group] : which == kMax ? max_lrs_[group] : min_lrs_[group];
}

double OneCycleLR::lr_at(int64_t epoch, size_t group) const {
    auto [phase, pct] = locate(epoch);
    return anneal(lr_of(phase->start_lr, group), lr_of(phase->end_lr, group), pct);
}

double OneCycleLR::momentum_at(int64_t epoch) const {
    auto [phase, pct] = locate(epoch);
    auto value = [&](Momentum m) { return m == kBase ? options_.base_momentum : options_.max_momentum; };
    return anneal(value(phase->start_momentum), value(phase->end_momentum), pct);
}

OneCycleOptions one_cycle_for_any_length(OneCycleOptions o) {
    if (o.total_steps == 1) o.total_steps = 2;
    if (o.total_steps < 2) return o;   // 0 or negative: OneCycleLR names the error
    const double T = static_cast<double>(o.total_steps);
    // The phase ends of the constructor, each > the one before (and the first > 0).
    const auto non_empty = [&](double pct) {
        const double first = pct * T - 1;
        if (!(first > 0)) return false;
        if (!o.three_phase) return T - 1 > first;
        return 2 * pct * T - 2 > first && T - 1 > 2 * pct * T - 2;
    };
    if (non_empty(o.pct_start)) return o;
    const double lo = 1 / T, hi = o.three_phase ? (T + 1) / (2 * T) : 1.0;
    o.pct_start = (lo + hi) / 2;
    return o;
}

void OneCycleLR::apply(int64_t epoch) {
    const double momentum = options_.cycle_momentum ? momentum_at(epoch) : 0;   // throws past the end, first
    LRScheduler::apply(epoch);
    if (options_.cycle_momentum)
        for (size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_momentum(g, momentum);
}

}  // namespace razor::optim
