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

// What is intact when a run stops at epoch `epoch`.
std::string intact(const FitOptions& o, int64_t epoch) {
    if (o.out.empty()) return "nothing was saved (this command writes its outputs at the end)";
    const int64_t before = o.position_offset + epoch - 1;
    if (before == 0 && !o.checkpointed) return "no checkpoint was written yet (epoch 1)";
    return fmt("the last checkpoint (", o.out, "/last, epoch ", before, ") is intact");
}

}  // namespace

FitResult fit(nn::Module& model, data::DataLoader& loader, Step& step, RunLog& log, const FitOptions& o,
              const FitHooks& hooks) {
    FitResult result;
    result.global_step = o.global_step, result.best_acc = o.best_acc, result.best_epoch = o.best_epoch;
    const int64_t spe = o.steps_per_epoch > 0 ? std::min(o.steps_per_epoch, loader.size()) : loader.size();
    NonFiniteGuard nonfinite(model, {.skip = o.skip_nonfinite});
    TapeMeter tape_meter;
    StepCurve curve;
    for (int64_t epoch = o.done + 1; epoch <= o.epochs; ++epoch) {
        if (hooks.begin_epoch) hooks.begin_epoch(epoch);
        loader.set_epoch(o.loader_epoch_offset + epoch - 1);
        Progress progress(fmt(o.label, epoch, "/", o.epochs), spe, o.batch);
        EpochSummary r;
        r.epoch = epoch, r.epochs = o.epochs, r.lr = step.lr();
        double loss_sum = 0;
        int64_t correct = 0, seen = 0, finite = 0;
        std::map<std::string, double> metric_sums;
        for (data::Batch& b : loader) {
            if (r.steps >= spe) break;
            tape_meter.begin_step();
            r.lr = step.lr();
            nonfinite.begin_step();
            StepResult s = step.run(b);
            if (!s.fault.empty()) {
                const std::string what = fmt(o.command, ": ", s.fault);
                const std::string where = fmt("at epoch ", epoch, " step ", r.steps + 1, "/", spe, " (global step ",
                                              result.global_step + 1, ", lr ", r.lr, ")");
                if (!step.can_skip())   // the step updated the parameters already: nothing to skip back to
                    throw Error(fmt(what, " ", where, "; stopped, ", intact(o, epoch),
                                    "; hint: lower the learning rate or check the inputs"));
                nonfinite.on_nonfinite(what, where, intact(o, epoch), [&] { step.rerun(b); });
                step.advance();   // skipped (on_nonfinite returned): the schedule moves on, as GradScaler's
                ++r.steps, ++result.global_step, ++r.skipped;
                continue;
            }
            nonfinite.step_ok();
            step.update();
            step.advance();
            ++r.steps, ++result.global_step, ++finite;
            const TapeTotals t = tape_meter.end_step();
            r.tape = larger(r.tape, t);
            const int64_t B = b.labels.size(0);
            loss_sum += s.loss * static_cast<double>(B);
            const int64_t right = s.logits.defined() ? count_correct(s.logits, b.labels) : 0;
            correct += right;
            seen += B;
            curve.add(r.steps, spe, s.loss, s.logits.defined() ? static_cast<double>(right) / B : std::nan(""), r.lr);
            for (const auto& [name, v] : s.metrics) metric_sums[name] += v;
            progress.update(r.steps, loss_sum / seen, static_cast<double>(correct) / seen,
                            hooks.progress ? hooks.progress(s, t) : tape_text(t));
        }
        progress.finish();
        r.step = result.global_step;
        r.seconds = progress.seconds();
        r.img_per_s = seen / std::max(r.seconds, 1e-9);
        r.curve = curve.take();
        r.loss = seen ? loss_sum / seen : 0;
        r.train_acc = seen ? static_cast<double>(correct) / seen : 0;
        for (const auto& [name, sum] : metric_sums) r.metrics[name] = finite ? sum / finite : 0;
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
        if (hooks.checkpoint) hooks.checkpoint(r);
        result.last = r;
        if (o.stop_at > 0 && epoch == o.stop_at) {
            result.stopped = true;
            break;
        }
    }
    return result;
}

}  // namespace razor::train
