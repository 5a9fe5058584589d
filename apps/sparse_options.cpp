// apps/sparse_options.cpp -- see sparse_options.h.
#include "apps/sparse_options.h"

namespace razor::apps {

const FlagTable<SparseOptions>& sparse_flag_table() {
    using O = SparseOptions;
    static const FlagTable<O> table = [] {
        FlagTable<O> t;
        t.text("model", "resnet32x2", "resnet20 | resnet32 | resnet56 | resnet32x2 | vgg16_bn | vgg19_bn", &O::model)
            .family(data_flag_family(), &O::data)
            .real("keep", "0.5", "channel KEEP ratio rho: the budget is sum(s) <= rho * n (the reference's "
                  "--prune-rate)", &O::keep)
            .integer("epochs", "300", "phase A epochs", &O::epochs)
            .integer("batch", "128", "images per step", &O::batch)
            .real("lr", "0.1", "SGD lr on w (cosine per epoch)", &O::lr)
            .real("lr-s", "12e-3", "Adam lr on s (cosine per epoch)", &O::lr_s)
            .real("momentum", "0.9", "SGD momentum (phase A and B)", &O::momentum)
            .real("wd", "5e-4", "SGD weight decay on every w, BN included (phase A and B)", &O::wd)
            .real("clip", "3", "joint gradient-norm clip over w and s (phase B: over w)", &O::clip)
            .real("s-init", "0.5", "initial keep probability of every channel", &O::s_init)
            .text("score-norm", "sqrt", "sqrt (the reference) | exact (unbiased leave-one-out)", &O::score_norm)
            .text("estimator", "vr-pge", "vr-pge (the reference: leave-one-out baseline) | pge (vanilla, no "
                  "baseline: an ablation, high variance)", &O::estimator)
            .text("projection", "bisection", "bisection (the reference) | exact (sort-based)", &O::projection)
            .text("variant", "two-backward", "two-backward (the reference) | one-backward (cheaper: one backward "
                  "pass)", &O::variant)
            .integer("align", "0", "round kept counts up to a multiple of this (8: SIMD; CHANGES the algorithm; 0 = "
                     "off)", &O::align)
            .integer("resample-every", "1", "structure update and a fresh subnetwork every N steps, w alone on that "
                     "subnetwork in between (the seed's strategy; 1 = the reference, every step); s then moves N times less "
                     "often: raise --lr-s with N (at N = 50, five times the N = 1 value ended 0.3 points below "
                     "N = 1 on resnet20, three seeds)",
                     &O::resample_every)
            .boolean("stream-masks", "ResNets: one mask per residual stream, shared by every conv that writes it, "
                     "so the stream shrinks with its writers (NOT the reference: one mask per conv)", &O::stream_masks)
            .integer("candidates", "10", "phase B: subnetworks drawn from the final s", &O::candidates)
            .integer("select-batches", "20", "phase B: training batches that score each candidate", &O::select_batches)
            .integer("finetune-epochs", "40", "phase B: fine-tune epochs of the chosen subnetwork (0 = none)",
                     &O::finetune_epochs)
            .real("finetune-lr", "1e-3", "phase B: constant SGD lr", &O::finetune_lr)
            .family(run_flag_family(), &O::run);
        t.set_default("out", "runs/sparse")
            .set_help("out", "run folder: last/, subnet/, log.jsonl")
            .set_help("seed", "seed for init, masks, shuffling and augmentation")
            .set_help("eval-every", "phase A: test one sampled subnet every N epochs (logging only; 0 = never)")
            .set_help("stop-after", "stop after this many epochs of the run (phase A epochs, then fine-tune epochs) "
                      "with a checkpoint, to continue later with --resume (0 = off)")
            .set_help("skip-nonfinite", "phase B: on a NaN/Inf loss or gradient, report the op, skip the step and go "
                      "on (gives up after 20 in a row); default and phase A: stop");
        return t;
    }();
    return table;
}

Args sparse_args() {
    return sparse_flag_table().args("sparse-train",
                                    "VR-PGE sparse training (phase A), subnetwork selection and fine-tune (phase B), "
                                    "export; checkpoints and --resume in either phase");
}

SparseOptions read_sparse_options(const Args& args) {
    const std::string cmd = "razor sparse-train";
    SparseOptions o = sparse_flag_table().read(args);
    if (o.run.eval_batch == 0) o.run.eval_batch = o.batch;   // evaluation holds no tape: below training's memory
    require(cmd, o.keep > 0 && o.keep <= 1, "keep", o.keep, "in (0, 1]");
    require(cmd, o.epochs >= 0, "epochs", o.epochs, ">= 0");
    require(cmd, o.epochs <= kMaxEpochs, "epochs", o.epochs, fmt("<= ", kMaxEpochs));
    require(cmd, o.batch >= 1, "batch", o.batch, ">= 1");
    require(cmd, o.batch <= kMaxCount, "batch", o.batch, fmt("<= ", kMaxCount));
    require(cmd, o.lr > 0 && o.lr_s > 0, "lr / --lr-s", fmt(o.lr, " / ", o.lr_s), "> 0");
    require(cmd, o.clip > 0, "clip", o.clip, "> 0");
    require(cmd, o.candidates >= 1, "candidates", o.candidates, ">= 1");
    require(cmd, o.select_batches >= 1, "select-batches", o.select_batches, ">= 1");
    require(cmd, o.finetune_epochs >= 0, "finetune-epochs", o.finetune_epochs, ">= 0");
    require(cmd, o.finetune_epochs <= kMaxEpochs, "finetune-epochs", o.finetune_epochs, fmt("<= ", kMaxEpochs));
    require(cmd, o.finetune_lr > 0, "finetune-lr", o.finetune_lr, "> 0");
    require(cmd, o.align >= 0, "align", o.align, ">= 0 (0 = off)");
    require(cmd, o.resample_every >= 1, "resample-every", o.resample_every,
            ">= 1 (1 = the reference: a structure update every step; N > 1: every N-th step)");
    require(cmd, o.resample_every <= kMaxCount, "resample-every", o.resample_every, fmt("<= ", kMaxCount));
    require(cmd, o.s_init >= 0 && o.s_init <= 1, "s-init", o.s_init, "in [0, 1]");
    require(cmd, o.score_norm == "sqrt" || o.score_norm == "exact", "score-norm", o.score_norm, "sqrt | exact");
    require(cmd, o.estimator == "vr-pge" || o.estimator == "pge", "estimator", o.estimator, "vr-pge | pge");
    require(cmd, o.projection == "bisection" || o.projection == "exact", "projection", o.projection,
            "bisection | exact");
    require(cmd, o.variant == "two-backward" || o.variant == "one-backward", "variant", o.variant,
            "two-backward | one-backward");
    check_data_flags(cmd, o.data);
    check_run_flags(cmd, o.run);
    return o;
}

train::VrpgeTrainerOptions vrpge_options(const SparseOptions& o) {
    train::VrpgeTrainerOptions v;
    v.s_init = static_cast<float>(o.s_init);
    v.adam.lr = o.lr_s;
    v.sgd = {.lr = o.lr, .momentum = o.momentum, .weight_decay = o.wd};
    v.step = {.rho = o.keep,
              .max_norm = o.clip,
              .score_norm = o.score_norm == "sqrt" ? sparse::ScoreNorm::Sqrt : sparse::ScoreNorm::Exact,
              .estimator = o.estimator == "vr-pge" ? sparse::Estimator::VrPge : sparse::Estimator::Pge,
              .projection = o.projection == "bisection" ? sparse::ProjectionMethod::Bisection
                                                        : sparse::ProjectionMethod::Exact,
              .variant = o.variant == "two-backward" ? sparse::VrpgeVariant::TwoBackward
                                                     : sparse::VrpgeVariant::OneBackward,
              .align = o.align};
    v.resample_every = o.resample_every;
    v.stream_masks = o.stream_masks;
    return v;
}

}  // namespace razor::apps
