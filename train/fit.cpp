// train/fit.cpp -- see fit.h.
#include "train/fit.h"

#include <cmath>
#include <cstdio>

#include "core/core.h"
#include "train/epoch_record.h"
#include "train/nonfinite.h"
#include "train/progress.h"
#include "train/tape_meter.h"

namespace razor::train {

double EpochSummary::metric(const std::string& name) const {
    auto it = metrics.find(name);
    return it == metrics.end() ? 0.0 : it->second;
}

double StepResult::metric(const std::string& name) const {
    for (const auto& [n, v] : metrics)
        if (n == name) return v;
    return 0.0;
}

std::string tape_text(const TapeTotals& t) {
    return fmt("tape ", format_bytes(t.stored_bytes), " (dense ", format_bytes(t.dense_bytes), ", ",
               fixed(t.stored_bytes ? double(t.dense_bytes) / t.stored_bytes : 0.0, 1), "x)");
}

namespace {

bool evaluated(const EvalSchedule& s, int64_t epoch, int64_t epochs, int64_t stop_at) {
    return (s.last && epoch == epochs) || (s.every > 0 && epoch % s.every == 0) || (s.at_stop && epoch == stop_at);
}

// Where the newest checkpoint of OUT/last stands: epochs (of the whole run) and steps into the next one.
struct Saved {
    int64_t epoch = 0, steps = 0;
    bool operator==(const Saved&) const = default;
};

std::string saved_text(const Saved& s) {
    const std::string steps = fmt(s.steps, " step", s.steps == 1 ? "" : "s", " of epoch ", s.epoch + 1);
    return !s.steps ? fmt("epoch ", s.epoch) : s.epoch ? fmt("epoch ", s.epoch, " and ", steps) : steps;
}

// What is intact when a run stops.
std::string intact(const FitOptions& o, const std::optional<Saved>& saved) {
    if (o.out.empty()) return "nothing was saved (this command writes its outputs at the end)";
    if (!saved) return "no checkpoint was written yet (epoch 1)";
    return fmt("the last checkpoint (", o.out, "/last, ", saved_text(*saved), ") is intact");
}

}  // namespace

FitResult fit(nn::Module& model, data::DataLoader& loader, Step& step, RunLog& log, const FitOptions& o,
              const FitHooks& hooks) {
    if (!o.out.empty() && !hooks.state)
        throw Error(fmt("train::fit (", o.command, "): FitOptions::out is set but FitHooks::state is not; hint: give "
                        "the command's checkpoint state, or leave out empty"));
    FitResult result;
    result.global_step = o.start.global_step, result.best_acc = o.start.best_acc, result.best_epoch = o.start.best_epoch;
    const int64_t spe = o.steps_per_epoch > 0 ? std::min(o.steps_per_epoch, loader.size()) : loader.size();
    NonFiniteGuard nonfinite(model, {.skip = o.skip_nonfinite});
    TapeMeter tape_meter;
    std::optional<Saved> saved;
    if (o.checkpointed || o.start.epoch > 0 || o.start.partial.steps > 0)
        saved = Saved{o.position_offset + o.start.epoch, o.start.partial.steps};
    // OUT/last (and OUT/best) at `position`.
    auto checkpoint = [&](const FitPosition& position, bool best) {
        if (o.out.empty()) return;
        Checkpoint ck = hooks.state(position);
        pack_epoch_progress(position.partial, ck.train_state);
        if (best) save_checkpoint(o.out, "best", ck);
        save_checkpoint(o.out, "last", ck);
        saved = Saved{o.position_offset + position.epoch, position.partial.steps};
        if (hooks.saved) hooks.saved(position);
    };
    // After a signal: OUT/last at `position` unless it holds it already, then Interrupted.
    auto stop_if_interrupted = [&](const FitPosition& position, const std::string& where) {
        if (!o.interrupts || !o.interrupts->requested()) return;
        const int sig = o.interrupts->signal();
        if (!o.out.empty() && saved != Saved{o.position_offset + position.epoch, position.partial.steps})
            checkpoint(position, false);
        const std::string how = o.out.empty() ? std::string("; nothing was saved (this command writes its outputs at "
                                                            "the end)")
                                              : fmt("; ", o.out, "/last holds the run after ", saved_text(*saved),
                                                    "; continue with: ", o.command, " --resume ", o.out);
        throw Interrupted(sig, fmt(o.command, ": interrupted by ", Interrupts::name(sig), " ", where, how));
    };
    for (int64_t epoch = o.start.epoch + 1; epoch <= o.epochs; ++epoch) {
        // The running sums: those the checkpoint kept for the first epoch of a run resumed mid-epoch, else zero.
        EpochProgress e = epoch == o.start.epoch + 1 ? o.start.partial : EpochProgress{};
        if (hooks.begin_epoch) hooks.begin_epoch(epoch);
        loader.set_epoch(o.loader_epoch_offset + epoch - 1, e.steps);
        Progress progress(fmt(o.label, epoch, "/", o.epochs), spe, o.batch, e.steps);
        const double seconds_before = e.seconds;
        auto position = [&] {   // inside this epoch, after e.steps steps
            e.seconds = seconds_before + progress.seconds();
            return FitPosition{epoch - 1, result.global_step, result.best_acc, result.best_epoch, e};
        };
        EpochSummary r;
        r.eval_split = o.eval_split;
        r.epoch = epoch, r.epochs = o.epochs, r.lr = step.lr();
        for (data::Batch& b : loader) {
            if (e.steps >= spe) break;
            stop_if_interrupted(position(), fmt("at epoch ", epoch, " step ", e.steps + 1, "/", spe));
            tape_meter.begin_step();
            r.lr = step.lr();
            nonfinite.begin_step();
            StepResult s = step.run(b);
            if (!s.fault.empty()) {
                const std::string what = fmt(o.command, ": ", s.fault);
                const std::string where = fmt("at epoch ", epoch, " step ", e.steps + 1, "/", spe, " (global step ",
                                              result.global_step + 1, ", lr ", r.lr, ")");
                if (!step.can_skip())   // the step updated the parameters already: nothing to skip back to
                    throw Error(fmt(what, " ", where, "; stopped, ", intact(o, saved),
                                    "; hint: lower the learning rate or check the inputs"));
                nonfinite.on_nonfinite(what, where, intact(o, saved), [&] { step.rerun(b); });
                step.advance();   // skipped (on_nonfinite returned): the schedule moves on, as GradScaler's
                ++e.steps, ++result.global_step, ++e.skipped;
                continue;
            }
            nonfinite.step_ok();
            step.update();
            step.advance();
            ++e.steps, ++result.global_step, ++e.finite;
            const TapeTotals t = tape_meter.end_step();
            e.tape = larger(e.tape, t);
            const int64_t B = b.labels.size(0);
            e.loss_sum += s.loss * static_cast<double>(B);
            const int64_t right = s.logits.defined() ? count_correct(s.logits, b.labels) : 0;
            e.correct += right;
            e.seen += B;
            e.curve.add(e.steps, spe, s.loss, s.logits.defined() ? static_cast<double>(right) / B : std::nan(""), r.lr);
            for (const auto& [name, v] : s.metrics) e.metric_sums[name] += v;
            progress.update(e.steps, e.loss_sum / e.seen, static_cast<double>(e.correct) / e.seen,
                            hooks.progress ? hooks.progress(s, t) : tape_text(t));
            if (o.save_every > 0 && result.global_step % o.save_every == 0 && e.steps < spe) checkpoint(position(), false);
        }
        progress.finish();
        r.steps = e.steps, r.skipped = e.skipped, r.tape = e.tape;
        r.step = result.global_step;
        // the epoch's training images over its training time (a resumed epoch: both include the part before)
        r.seconds = seconds_before + progress.seconds();
        r.img_per_s = static_cast<double>(e.seen) / std::max(r.seconds, 1e-9);
        r.curve = e.curve.take();
        r.loss = e.seen ? e.loss_sum / e.seen : 0;
        r.train_acc = e.seen ? static_cast<double>(e.correct) / e.seen : 0;
        for (const auto& [name, sum] : e.metric_sums) r.metrics[name] = e.finite ? sum / e.finite : 0;
        result.tape = larger(result.tape, r.tape);

        if (evaluated(o.eval, epoch, o.epochs, o.stop_at)) {
            r.eval = hooks.evaluate(epoch);
            r.best = r.eval->accuracy > result.best_acc;
            if (r.best) result.best_acc = r.eval->accuracy, result.best_epoch = epoch;
        }
        r.best_acc = result.best_acc, r.best_epoch = result.best_epoch;
        r.rss_bytes = current_rss_bytes(), r.peak_rss_bytes = peak_rss_bytes();
        r.peak_tensor_bytes = memory_stats().peak_bytes;
        std::printf("%s\n", hooks.line(r).c_str());
        std::fflush(stdout);
        nlohmann::json entry = hooks.record(r);
        if (!r.curve.empty()) entry["curve"] = curve_json(r.curve);
        log.write(entry);
        const FitPosition end{epoch, result.global_step, result.best_acc, result.best_epoch, {}};
        checkpoint(end, o.save_best && r.best);
        result.last = r;
        if (o.stop_at > 0 && epoch == o.stop_at) {
            result.stopped = true;
            break;
        }
        if (epoch < o.epochs) stop_if_interrupted(end, fmt("after epoch ", epoch));
    }
    return result;
}

}  // namespace razor::train
