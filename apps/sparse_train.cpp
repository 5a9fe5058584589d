// apps/sparse_train.cpp -- `razor sparse-train`: VR-PGE completely sparse training (Zhou et al., NeurIPS 2021) of a
// CIFAR ResNet or VGG, then the fixed subnetwork's fine-tune and its export as a physically smaller dense model.
//
// reference: the official VRPGE code (trainers/default.py, main loop and the "finetune" phase). docs: docs/vr-pge.md
// §8-§10, docs/cli.md.
//
// Both phases run the one training loop (train/fit.h):
// Phase A (--epochs): every step is one VR-PGE iteration (train/steps.h VrpgeStep, train/vrpge_trainer.h): two
//   Bernoulli subnetworks of s on the same minibatch, each run compact, the estimator into s.grad, one joint clip
//   (--clip 3) over w and s, Adam on s, SGD on w, the projection onto Σ s <= keep·n. lr_w and lr_s follow
//   ½(1 + cos(π e / E)) per epoch. --resample-every N > 1 (the seed's strategy, labelled): that iteration every N-th
//   step, then one subnetwork drawn from s on which the N - 1 steps in between train w alone (one compact pass each). The per-epoch test accuracy is LOGGING ONLY: one Bernoulli sample of s, eval mode.
//   A non-finite iteration stops the run (it has updated w and s already: nothing to skip back to).
// Phase B: s is frozen. --candidates subnetworks are drawn from the final s and scored by training accuracy
//   (train/subnet.h select_subnetwork); the best is fine-tuned for --finetune-epochs with SGD lr --finetune-lr
//   (constant), momentum, --wd, clip --clip over w: the dense step on the fixed subnetwork (SubnetScope), with
//   train's non-finite policy (stop, or --skip-nonfinite). The last-epoch and best-epoch test accuracies are reported
//   (the reference reports the best, selected on the test set: optimistic).
// Checkpoints and --resume: OUT/last/ after every epoch of both phases and after the selection (and every
//   --save-every N steps, and after the step in flight on Ctrl-C / SIGTERM: train/fit.h): the weights and BN
//   statistics, and in train_state.safetensors the phase, s, the RNG states (init, masks, default), the run's flags;
//   in phase A Adam's state on s and SGD's on w, the steps taken and the interval's subnetwork (vrpge.steps,
//   interval.*), in phase B the chosen subnetwork (plan.counts, plan.kept), the fine-tune SGD's state and the test
//   accuracies so far. `--resume OUT` continues bit-exactly (same --threads).
//   --stop-after E stops after the E-th epoch of the run (phase A epochs, then fine-tune epochs).
// Export: OUT/subnet/model.safetensors, the fine-tuned subnetwork as a smaller dense model with its widths in the
//   metadata: `razor eval --checkpoint OUT/subnet` loads it, and so does PyTorch (the zoo model with those widths).
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "apps/commands.h"
#include "apps/threads.h"
#include "apps/resume.h"
#include "apps/sparse_options.h"
#include "apps/sparse_records.h"
#include "apps/sparse_state.h"
#include "core/core.h"
#include "models/registry.h"
#include "train/data_splits.h"
#include "train/epoch_record.h"
#include "train/fit.h"
#include "train/run_folder.h"
#include "train/steps.h"
#include "train/subnet.h"
#include "train/train_state.h"

namespace razor::apps {
namespace fs = std::filesystem;
using json = nlohmann::json;
using train::fixed;

namespace {

constexpr const char* kCmd = "razor sparse-train";

double cosine(double base, int64_t epoch, int64_t epochs) {
    return 0.5 * (1 + std::cos(M_PI * static_cast<double>(epoch) / static_cast<double>(epochs))) * base;
}

}  // namespace

int run_sparse_train(const std::vector<std::string>& argv) {
    Args args = sparse_args();
    if (!args.parse_or_usage(argv)) return 0;
    const RunStart start = start_run(kCmd, sparse_flag_table().specs(), args, "sparse-train",
                                     " (its train state has no s, no phase); hint: continue a razor train run with "
                                     "razor train --resume");
    const SparseOptions o = read_sparse_options(args);
    const std::string& out = o.run.out;
    const train::RunLock lock(kCmd, out);   // one run writes --out at a time, for the whole run
    if (!start.resuming) refuse_used_out(kCmd, out, o.run.overwrite, {"last", "last.old", "subnet"});
    const std::string log_path = (fs::path(out) / "log.jsonl").string();
    train::check_log_path(kCmd, log_path, !start.resuming, o.run.overwrite);
    apply_threads("razor sparse-train", o.run.threads);
    std::printf("%s\n", runtime_banner().c_str());

    // ---- data ----
    const train::DataSplits data = train::load_splits(kCmd, o.data.dataset, o.data.data, split_options(kCmd, o.data, nullptr));
    const data::TransformPtr eval_tf = data::eval_transform(data.preprocess());
    const Shape image = {data.train.image_shape()[0], data.image_size, data.image_size};   // (C, H, W) the model sees
    data::DataLoader loader = train::train_loader(data, augment_of(o.data), o.batch, o.run.seed, o.data.workers);
    const int64_t spe = o.run.steps_per_epoch > 0 ? std::min(o.run.steps_per_epoch, loader.size()) : loader.size();
    std::printf("data   %s: %lld train, %lld test images %s, %lld classes\n", o.data.dataset.c_str(),
                static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
                shape_str(image).c_str(), static_cast<long long>(data.train.num_classes));

    // ---- model, scores, optimisers (the fine-tune SGD exists from the start: a run resumed in B loads it) ----
    Generator gen(static_cast<uint64_t>(o.run.seed));
    manual_seed(static_cast<uint64_t>(o.run.seed));
    auto model = models::make_model(o.model, data.train.num_classes, gen, {.in_channels = image[0], .image_size = image[1]});
    const train::VrpgeTrainerOptions vo = vrpge_options(o);
    train::VrpgeTrainer trainer(model, vo);
    Generator mask_gen(static_cast<uint64_t>(o.run.seed) + 0x5eed);   // masks: their own stream
    const int64_t n = trainer.scores.num_masked_channels();
    int64_t scored = 0;
    for (const auto& layer : trainer.scores.layers()) scored += layer.masked;
    std::printf("model  %s: %lld parameters, %lld scored convs (%lld own masks), n = %lld prunable channels "
                "(classifier excluded)\n",
                o.model.c_str(), static_cast<long long>(model->num_parameters()), static_cast<long long>(scored),
                static_cast<long long>(trainer.scores.parameters().size()), static_cast<long long>(n));
    std::printf("vrpge  keep %g (budget %.1f channels) | s init %g | %s | %s | score %s | projection %s | clip %g | "
                "BN true-sparse%s%s%s\n",
                o.keep, trainer.scores.budget(o.keep), o.s_init, train::variant_name(vo.step.variant).c_str(),
                o.estimator == "pge" ? "estimator: vanilla PGE, no baseline (an ablation, NOT the reference)"
                                     : "estimator: VR-PGE",
                o.score_norm.c_str(), o.projection.c_str(), o.clip,
                o.align ? fmt(" | --align ", o.align, ": kept counts rounded up, CHANGES the algorithm (biased "
                              "estimator)").c_str() : "",
                o.resample_every > 1 ? fmt(" | --resample-every ", o.resample_every, ": s updated and the subnetwork "
                                           "resampled every ", o.resample_every, " steps, w alone on it in between "
                                           "(the seed's strategy, NOT the reference)").c_str() : "",
                o.stream_masks ? " | --stream-masks: one mask per residual stream, shared by its writers (NOT the "
                                 "reference)" : "");
    std::printf("train  phase A %lld epoch%s x %lld steps of %lld, SGD lr %g Adam lr_s %g (cosine per epoch) | phase B "
                "%lld candidate%s, %lld fine-tune epoch%s at lr %g | seed %lld\n",
                static_cast<long long>(o.epochs), o.epochs == 1 ? "" : "s", static_cast<long long>(spe),
                static_cast<long long>(o.batch), o.lr, o.lr_s, static_cast<long long>(o.candidates),
                o.candidates == 1 ? "" : "s", static_cast<long long>(o.finetune_epochs),
                o.finetune_epochs == 1 ? "" : "s", o.finetune_lr,
                static_cast<long long>(o.run.seed));
    optim::SGD ft(model->named_parameters(), {.lr = o.finetune_lr, .momentum = o.momentum, .weight_decay = o.wd});
    SparsePosition at;
    train::EpochProgress partial;   // a checkpoint taken inside an epoch of the phase it records
    if (start.resuming) {
        at = restore_sparse_state(start.resumed, o, *model, trainer, ft, gen, mask_gen);
        partial = train::read_epoch_progress(start.resumed.train_state,
                                             start.resumed.folder + "/" + train::kTrainStateFile, spe);
        std::printf("resume %s: %s\n", start.resumed.folder.c_str(),
                    at.in_b ? fmt("phase B, subnetwork chosen, after fine-tune epoch ", at.b_done, "/",
                                  o.finetune_epochs).c_str()
                            : fmt("phase A, after epoch ", at.a_done, "/", o.epochs).c_str());
        if (partial.steps) std::printf("       and %lld of %lld steps of the next epoch\n",
                                       static_cast<long long>(partial.steps), static_cast<long long>(spe));
        const int64_t a_steps = at.a_done * spe + (at.in_b ? 0 : partial.steps);   // phase A's steps taken
        if (!at.in_b && o.resample_every > 1 && trainer.steps_done() != a_steps)
            throw Error(fmt(kCmd, ": ", start.resumed.folder, " holds vrpge.steps ", trainer.steps_done(), " but its "
                            "position is phase-A step ", a_steps, "; hint: resume from a checkpoint razor sparse-train "
                            "wrote, unchanged"));
    }

    // ---- outputs: a resumed run keeps the log lines its checkpoint holds (later ones are written again) ----
    const auto meta = train::model_metadata(o.model, o.data.dataset, data);
    const json config = run_config(sparse_flag_table().specs(), args);
    train::OverwrittenRun overwritten;   // --overwrite: the old run kept aside until the first checkpoint
    if (!start.resuming && o.run.overwrite)
        overwritten = train::OverwrittenRun(kCmd, out, {(fs::path(out) / "last").string(),
                                                        (fs::path(out) / "last.old").string(),
                                                        (fs::path(out) / "subnet").string(), log_path,
                                                        (fs::path(out) / "curves.svg").string()});
    std::function<bool(const json&)> keep_line;
    if (start.resuming)
        keep_line = [&](const json& j) {
            const std::string phase = j.value("phase", "");
            const int64_t e = j.contains("epoch") && j["epoch"].is_number() ? j["epoch"].get<int64_t>() : 0;
            if (phase == "A") return e <= at.a_done;
            if (phase == "B-select") return at.in_b;
            if (phase == "B") return at.in_b && e <= at.b_done;
            return false;   // "export": written again at the end
        };
    train::RunLog log(kCmd, log_path, keep_line, (fs::path(out) / "curves.svg").string());
    auto state = [&] { return sparse_checkpoint(at, o, *model, trainer, ft, gen, mask_gen, meta, config.dump()); };
    auto saved = [&](const train::FitPosition&) { overwritten.finish(); };   // the new run has a checkpoint now
    const train::Interrupts interrupts;   // from here on, Ctrl-C checkpoints after the step in flight
    // --stop-after E: after the E-th epoch of the run (phase A epochs, then fine-tune epochs), unless the last.
    const int64_t total = o.epochs + o.finetune_epochs, stop = o.run.stop_after < total ? o.run.stop_after : 0;
    auto stopped = [&](const train::FitResult& r, int64_t offset) {
        if (!r.stopped) return false;
        std::printf("stopped after epoch %lld of %lld (--stop-after); continue with: razor sparse-train --resume %s\n",
                    static_cast<long long>(offset + r.last->epoch), static_cast<long long>(total), out.c_str());
        return true;
    };
    auto evaluate = [&] {
        return train::evaluate(*model, data.eval_set(), eval_tf, o.run.eval_batch,
                               {.max_batches = o.run.eval_steps, .progress = "test"});
    };

    // ---- phase A: joint sparse training ----
    train::VrpgeStep vrpge(trainer, mask_gen);
    train::FitHooks a;
    a.begin_epoch = [&](int64_t epoch) {
        trainer.opt_w.set_lr(cosine(o.lr, epoch - 1, o.epochs));
        trainer.opt_s.set_lr(cosine(o.lr_s, epoch - 1, o.epochs));
    };
    a.progress = [&](const train::StepResult& s, const TapeTotals&) {
        return fmt("E[keep] ", fixed(trainer.expected_keep(), 3), "  flops ", fixed(s.metric("flops_ratio"), 3),
                   "x dense");
    };
    a.evaluate = [&](int64_t epoch) {   // logging only: one Bernoulli subnet of s, eval mode, nothing updated
        Generator eval_gen(static_cast<uint64_t>(o.run.seed) * 7919 + static_cast<uint64_t>(epoch));
        train::SubnetScope subnet(models::ChannelPlan::from_masks(trainer.scores.layers(), trainer.scores.sample(eval_gen)));
        return evaluate();
    };
    a.record = [&](const train::EpochSummary& r) { return phase_a_record(r, trainer); };
    a.line = [&](const train::EpochSummary& r) { return phase_a_line(r, trainer); };
    a.state = [&](const train::FitPosition& p) { return at.a_done = p.epoch, state(); };
    a.saved = saved;
    // The partial epoch a resumed checkpoint holds belongs to the phase it was written in.
    const train::EpochProgress a_partial = at.in_b ? train::EpochProgress{} : partial;
    const train::EpochProgress b_partial = at.in_b ? partial : train::EpochProgress{};
    const auto ra = train::fit(*model, loader, vrpge, log, {.command = kCmd, .label = "A ", .epochs = o.epochs,
        .start = {.epoch = at.a_done, .global_step = at.a_done * spe + a_partial.steps, .partial = a_partial},
        .steps_per_epoch = spe, .batch = o.batch,
        .eval = {.every = o.run.eval_every, .last = o.run.eval_every > 0}, .stop_at = stop <= o.epochs ? stop : 0,
        .out = out, .save_every = o.run.save_every, .interrupts = &interrupts}, a);
    if (stopped(ra, 0)) return 0;

    // ---- phase B: pick the best of --candidates subnetworks by training accuracy, then fine-tune it ----
    model->train();
    if (!at.in_b) {
        data::DataLoader select = train::train_loader(data, false, o.batch, o.run.seed + 1, o.data.workers);
        at.plan = train::select_subnetwork(*model, trainer.scores, select, o.candidates,
                                           o.select_batches, mask_gen, image, log);
        at.in_b = true;
        train::save_checkpoint(out, "last", state());   // the choice is kept: a resumed run fine-tunes this subnetwork
        overwritten.finish();
    }
    train::SubnetScope subnet(at.plan);
    train::DenseStep finetune(*model, ft, nullptr, {.clip = o.clip});
    train::FitHooks b;
    b.progress = [&](const train::StepResult&, const TapeTotals&) {
        return fmt("flops ", fixed(subnet.cost_ratio(), 3), "x dense");
    };
    b.evaluate = [&](int64_t) { return evaluate(); };
    b.record = [&](const train::EpochSummary& r) {
        at.last_acc = r.eval->accuracy;   // for the checkpoint that follows the record
        return phase_b_record(r);
    };
    b.line = phase_b_line;
    b.state = [&](const train::FitPosition& p) {
        at.b_done = p.epoch, at.best_acc = p.best_acc, at.best_epoch = p.best_epoch;
        return state();
    };
    b.saved = saved;
    const auto rb = train::fit(*model, loader, finetune, log, {.command = kCmd, .label = "B ",
        .epochs = o.finetune_epochs, .start = {.epoch = at.b_done, .global_step = at.b_done * spe + b_partial.steps,
        .best_acc = at.best_acc, .best_epoch = at.best_epoch, .partial = b_partial}, .loader_epoch_offset = o.epochs,
        .steps_per_epoch = spe, .batch = o.batch, .skip_nonfinite = o.run.skip_nonfinite, .eval = {.every = 1},
        .stop_at = stop > o.epochs ? stop - o.epochs : 0, .out = out, .save_every = o.run.save_every,
        .checkpointed = true, .position_offset = o.epochs, .interrupts = &interrupts}, b);
    if (stopped(rb, o.epochs)) return 0;
    if (o.finetune_epochs == 0) at.last_acc = at.best_acc = evaluate().accuracy;

    // ---- export: the physically smaller dense model ----
    subnet.reset();   // the export and its check run dense (the scope would apply to any model on this thread)
    auto sub_meta = meta;
    sub_meta["keep"] = fmt(o.keep);
    sub_meta["epoch"] = fmt(total);
    const train::ExportedSubnet sub =
        train::export_subnetwork(*model, trainer.prunable, at.plan, sub_meta, out, image, o.run.seed);
    const train::EvalResult check = train::evaluate(*sub.model, data.eval_set(), eval_tf, o.run.eval_batch,
                                                    {.max_batches = o.run.eval_steps, .progress = "test subnet"});
    log.write({{"phase", "export"}, {"params", sub.model->num_parameters()}, {"dense_params", model->num_parameters()},
               {"widths", sub.widths}, {"test_acc", check.accuracy}, {"last_test_acc", at.last_acc},
               {"best_test_acc", at.best_acc}, {"best_epoch", at.best_epoch}});
    std::printf("\nresult  subnetwork test accuracy %.2f%% after the last fine-tune epoch (best %.2f%% at epoch %lld, "
                "selected on the test set: optimistic)  |  %lld of %lld parameters (%.1f%%)  |  BN true-sparse%s\n",
                100 * at.last_acc, 100 * at.best_acc, static_cast<long long>(at.best_epoch),
                static_cast<long long>(sub.model->num_parameters()), static_cast<long long>(model->num_parameters()),
                100.0 * sub.model->num_parameters() / model->num_parameters(),
                o.align ? fmt(", --align ", o.align, " (changes the algorithm)").c_str() : "");
    std::printf("wrote   %s (razor eval --checkpoint %s/subnet loads it: %.2f%%), %s/last/, %s, %s\n", sub.path.c_str(),
                out.c_str(), 100 * check.accuracy, out.c_str(), log.path().c_str(), log.plot_path().c_str());
    return 0;
}

}  // namespace razor::apps
