// apps/sparse_records.cpp -- see sparse_records.h.
#include "apps/sparse_records.h"

#include "core/check.h"
#include "train/epoch_record.h"

namespace razor::apps {
namespace {

using json = nlohmann::json;
using train::fixed;

// The evaluation fields every epoch entry carries (null when the epoch was not evaluated).
void eval_fields(json& j, const train::EpochSummary& r) {
    j["eval_seconds"] = r.eval ? r.eval->seconds : 0.0;
    j["test_images"] = r.eval ? json(r.eval->images) : json(nullptr);
}

// The mean of s.grad's norm over the epoch's resample steps (the steps that update s; every step when N = 1, where
// the division is by exactly 1), or 0 when none of its steps resampled.
double s_grad_norm(const train::EpochSummary& r) {
    const double resampled = r.metric("resampled");
    return resampled > 0 ? r.metric("s_grad_norm") / resampled : 0.0;
}

}  // namespace

json phase_a_record(const train::EpochSummary& r, const train::VrpgeTrainer& trainer) {
    json j{{"phase", "A"}, {"epoch", r.epoch}, {"epochs", r.epochs}, {"loss", r.loss},
           {"train_acc", r.train_acc}, {"expected_keep", trainer.expected_keep()},
           {"flops_ratio", r.metric("flops_ratio")},
           {"grad_norm", r.metric("grad_norm")},   // mean norm before the clip: joint (w and s), w's between resamples
           {"s_grad_norm", s_grad_norm(r)},        // mean norm of s.grad alone, before the clip, at resample steps
           {"clipped", r.metric("clipped")},       // fraction of steps clipped
           {"resample_every", trainer.resample_every},
           {"resampled", r.metric("resampled")},   // fraction of steps that ran the reference iteration
           {"lr", trainer.opt_w.lr()}, {"lr_s", trainer.opt_s.lr()}, {"seconds", r.seconds},
           {"img_per_s", r.img_per_s},
           {"test_acc_sampled", r.eval ? json(r.eval->accuracy) : json(nullptr)}};
    eval_fields(j, r);
    return j;
}

std::string phase_a_line(const train::EpochSummary& r, const train::VrpgeTrainer& trainer) {
    return fmt("A ", r.epoch, "/", r.epochs, "  loss ", fixed(r.loss, 4), "  train ", fixed(100 * r.train_acc, 1),
               "%  test(1 sample, logging only) ", r.eval ? fixed(100 * r.eval->accuracy, 1) + "%" : "-",
               "  E[keep] ", fixed(trainer.expected_keep(), 3), "  flops ", fixed(r.metric("flops_ratio"), 3),
               "x  lr ", train::general(trainer.opt_w.lr()), "  lr_s ", train::general(trainer.opt_s.lr()),
               "  norm ", fixed(r.metric("grad_norm"), 2), " (s ", fixed(s_grad_norm(r), 2),
               ", clipped ", fixed(100 * r.metric("clipped"), 0), "%)  ", train::seconds_text(r), "  ",
               fixed(r.img_per_s, 0), " img/s");
}

json phase_b_record(const train::EpochSummary& r) {
    json j = {{"phase", "B"}, {"epoch", r.epoch}, {"loss", r.loss}, {"train_acc", r.train_acc},
              {"test_acc", r.eval->accuracy}, {"lr", r.lr}, {"seconds", r.seconds}, {"img_per_s", r.img_per_s}};
    eval_fields(j, r);
    if (r.skipped) j["skipped_steps"] = r.skipped;
    return j;
}

std::string phase_b_line(const train::EpochSummary& r) {
    return fmt("B ", r.epoch, "/", r.epochs, "  loss ", fixed(r.loss, 4), "  train ", fixed(100 * r.train_acc, 1),
               "%  test ", fixed(100 * r.eval->accuracy, 2), "%  ", train::seconds_text(r), "  ",
               fixed(r.img_per_s, 0), " img/s") +
           (r.skipped ? fmt("  skipped ", r.skipped, " non-finite steps") : std::string());
}

}  // namespace razor::apps
