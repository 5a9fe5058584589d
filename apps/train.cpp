// apps/train.cpp -- `razor train`: train a zoo model on CIFAR-10/100, Fashion-MNIST or an image folder, with
// checkpoints, bit-exact resume, a JSONL log and an SVG plot of the curves. `razor finetune` is this same command on a
// pretrained backbone with a new head (--from, --freeze-bn, fine-tuning defaults; apps/finetune.h).
//
// reference: the usual PyTorch CIFAR script (torchvision RandomCrop(32, 4) + RandomHorizontalFlip, SGD with Nesterov
// momentum and weight decay, an lr schedule stepped once per iteration); bench/train_cifar_torch.py is its PyTorch
// twin. docs: docs/cli.md (flags, files, resume), docs/recipes.md (schedules and measured accuracy).
//
// The loop is train/fit.h with the dense step (train/steps.h): zero_grad, forward, loss, backward, [clip], step,
// scheduler step. Schedules are stepped per iteration; --warmup-epochs, --milestones and --step-size are in epochs.
//
// Resume: every epoch ends with a checkpoint in OUT/last (train/checkpoint.h) holding the weights, the optimizer and
// scheduler state, the epoch and step, the RNG states and this run's flags; --save-every N adds one every N steps,
// and Ctrl-C (SIGINT) or SIGTERM one after the step in flight (train/interrupt.h). `--resume OUT` restores all of it
// and continues where the checkpoint stands, mid-epoch too (train/fit_position.h); the data loader's order and
// augmentation are a function of (seed, epoch), so the continued run is bit-for-bit the run that was never
// interrupted (same --threads). Flags that would change the
// computation must match the checkpoint's (or be left out); --threads, --out, --log, --data, --eval-every,
// --stop-after, --workers and --eval-batch may change, and --epochs may for schedules that do not depend on it.
//
// --razor R (both commands) trains under Back Razor's save policy (sparse/razor_policy.h, apps/razor_flags.h): the
// forward is unchanged, the tape keeps each saved activation pruned to its top (1 - R) per sample. The progress and
// epoch lines show the tape's stored bytes against the dense-equivalent bytes and their ratio.
#include <cstdio>
#include <filesystem>

#include "apps/commands.h"
#include "apps/threads.h"
#include "apps/finetune.h"
#include "apps/param_groups.h"
#include "apps/resume.h"
#include "apps/train_options.h"
#include "core/core.h"
#include "models/registry.h"
#include "train/data_splits.h"
#include "train/epoch_record.h"
#include "train/fit.h"
#include "train/run_folder.h"
#include "train/steps.h"
#include "train/train_state.h"

namespace razor::apps {
namespace fs = std::filesystem;
using train::Checkpoint;

namespace {

// The ViT depth a resumed checkpoint records (0 when it records none: the model's default).
int64_t recorded_depth(const std::string& cmd, const Checkpoint& r) {
    const auto it = r.model_metadata.find("depth");
    if (it == r.model_metadata.end()) return 0;
    const std::vector<double> v = train::parse_number_list(cmd, "depth (checkpoint metadata)", it->second);
    if (v.size() != 1 || v[0] < 1 || v[0] != static_cast<double>(static_cast<int64_t>(v[0])))
        throw Error(fmt(cmd, ": checkpoint metadata depth in ", r.folder, " is '", it->second, "'; expected one whole "
                        "number >= 1; hint: the metadata was edited or damaged"));
    return static_cast<int64_t>(v[0]);
}

int run_training(const std::vector<std::string>& argv, bool finetune) {
    Args args = train_args(finetune);
    if (!args.parse_or_usage(argv)) return 0;
    const std::string cmd = finetune ? "razor finetune" : "razor train";
    const auto& specs = train_flag_table(finetune).specs();
    RunStart start = start_run(cmd, specs, args);   // its checkpoint's tensors are dropped once restored (below)
    TrainOptions c = read_train_options(args, finetune);
    const train::RunLock lock(cmd, c.run.out);   // one run writes --out at a time, for the whole run
    if (start.resuming) check_resumed_epochs(c, resumed_run(start.resumed).config_json);
    else refuse_used_out(cmd, c.run.out, c.run.overwrite);
    train::check_log_path(cmd, c.log, !start.resuming, c.run.overwrite);
    // The tape's save policy for everything this thread records (evaluation records nothing: NoGradGuard).
    SavePolicyGuard save_policy(razor_policy_from_flags(cmd, c.razor));
    // Fine-tuning starts from --from (a resumed run from its own checkpoint); --model defaults to the checkpoint's.
    Checkpoint pretrained;
    // A ViT file cut to fewer blocks (0: the model's default): read off --from's keys, recorded in the checkpoint's
    // metadata ("depth") so that --resume, razor eval and predict rebuild the same model.
    int64_t depth = start.resuming ? recorded_depth(cmd, start.resumed) : 0;
    if (finetune && (!start.resuming || c.model.empty())) {
        pretrained = train::open_checkpoint(c.from, true);
        const PretrainedModel m = pretrained_model(cmd, c.from, c.model, pretrained);
        c.model = m.name;
        if (!start.resuming) depth = m.depth;
        for (const auto& [key, value] : m.preprocessing) pretrained.model_metadata.try_emplace(key, value);
    }
    apply_threads(cmd, c.run.threads);
    std::printf("%s\n", runtime_banner().c_str());

    // ---- data ----
    // A fine-tune keeps its backbone's preprocessing (resolution, interpolation, mean/std) unless flags say otherwise.
    const auto* defaults = !finetune ? nullptr : start.resuming ? &start.resumed.model_metadata : &pretrained.model_metadata;
    const train::DataSplits data =
        train::load_splits(cmd, c.data.dataset, c.data.data, split_options(cmd, c.data, defaults));
    const Shape image = {data.train.image_shape()[0], data.image_size, data.image_size};   // (C, H, W) the model sees
    const data::ImageDataset& eval_set = data.eval_set();
    std::printf("data   %s: %lld train, %lld val, %lld test images, %lld classes; %s at %lld px (eval crop_pct %g, "
                "%s), normalise mean (%s) std (%s); evaluating on %s (%s)\n",
                c.data.dataset.c_str(), static_cast<long long>(data.train.size()), static_cast<long long>(data.val.size()),
                static_cast<long long>(data.test.size()), static_cast<long long>(data.train.num_classes),
                data::augment_name(augment_of(c.data)).c_str(), static_cast<long long>(data.image_size), data.crop_pct,
                data::interpolation_name(data.interpolation).c_str(), train::join_floats(data.mean).c_str(),
                train::join_floats(data.std).c_str(), data.eval_split().c_str(), eval_set.name.c_str());
    if (start.resuming) check_resumed_data(cmd, start.resumed, data);
    data::DataLoader loader = train::train_loader(data, augment_of(c.data), c.batch, c.run.seed, c.data.workers);
    const data::TransformPtr eval_tf = data::eval_transform(data.preprocess());
    const int64_t spe = c.run.steps_per_epoch > 0 ? std::min(c.run.steps_per_epoch, loader.size()) : loader.size();

    // ---- model, optimizer, schedule ----
    Generator gen(static_cast<uint64_t>(c.run.seed));
    manual_seed(static_cast<uint64_t>(c.run.seed));
    std::vector<int64_t> widths;   // --widths: a narrower ResNet or VGG (razor train only)
    for (double w : c.widths.empty() ? std::vector<double>{} : train::parse_number_list(cmd, "widths", c.widths)) {
        if (w < 1 || w != static_cast<double>(static_cast<int64_t>(w)))
            throw Error(fmt(cmd, ": --widths expected whole numbers >= 1, got ", w, " in '", c.widths,
                            "'; hint: copy the 'widths' metadata of a razor sparse-train subnet (razor info --checkpoint)"));
        widths.push_back(static_cast<int64_t>(w));
    }
    std::shared_ptr<nn::Module> model;
    try {
        model = models::make_model(c.model, data.train.num_classes, gen,
                                   {.in_channels = image[0], .image_size = image[1], .depth = depth, .widths = widths});
    } catch (const Error& e) {
        if (widths.empty()) throw;
        throw Error(fmt(cmd, ": --widths ", c.widths, " does not describe a ", c.model, ": ", e.what()));
    }
    if (finetune && !start.resuming)
        std::printf("%s", pretrained_lines(c.from, load_pretrained(cmd, c.from, *model, pretrained),
                                           data.train.num_classes).c_str());
    pretrained.model.clear();   // copied into the model: keeping the file's tensors would hold the weights twice
    const DenseLayers dense = keep_layers_dense(*model, c.razor);
    if (!dense.input.empty())
        std::printf("razor  %s keeps its input (the image batch) dense (--razor-input dense)\n", dense.input.c_str());
    if (!dense.head.empty())
        std::printf("razor  %s keeps its input (the features) dense (--razor-head dense)\n", dense.head.c_str());
    const TrainableParameters trainable = trainable_parameters(c, *model);   // frozen ones have no optimiser state
    std::printf("%s", trainable.lines.c_str());
    auto opt = make_optimizer(c.optimiser, trainable.groups);
    auto sched = make_scheduler(c, *opt, spe);
    const OptimiserFlags& o = c.optimiser;
    std::printf("model  %s: %lld parameters (%s)\n", c.model.c_str(), static_cast<long long>(model->num_parameters()),
                format_bytes(model->num_parameters() * 4).c_str());
    std::printf("train  %s lr %g momentum %g%s wd %g | %s (warm-up %g epoch%s) | %lld epoch%s x %lld steps of %lld | "
                "augment %s | label smoothing %g | clip %g%s | seed %lld\n",
                o.opt.c_str(), o.lr, o.momentum, o.nesterov ? " nesterov" : "", o.wd, c.schedule.sched.c_str(),
                c.warmup_epochs, c.warmup_epochs == 1 ? "" : "s", static_cast<long long>(c.epochs),
                c.epochs == 1 ? "" : "s", static_cast<long long>(spe),
                static_cast<long long>(c.batch), data::augment_name(augment_of(c.data)).c_str(), c.label_smoothing, c.clip,
                c.step_in_backward ? " | step in backward" : "", static_cast<long long>(c.run.seed));

    train::FitOptions fo{.command = cmd, .epochs = c.epochs, .steps_per_epoch = spe, .batch = c.batch,
                         .skip_nonfinite = c.run.skip_nonfinite,
                         .eval = {.every = c.run.eval_every, .last = c.run.eval_every > 0,
                                  .at_stop = c.run.eval_every > 0},
                         .eval_split = data.eval_split(),   // best/ is chosen on it: val when there is one
                         .stop_at = c.run.stop_after < c.epochs ? c.run.stop_after : 0, .out = c.run.out,
                         .save_every = c.run.save_every, .save_best = true};
    if (start.resuming) {
        const Checkpoint& r = start.resumed;
        try {
            model->load_state_dict(r.model);
        } catch (const Error& e) {
            throw Error(fmt(cmd, ": ", r.folder, "/", train::kModelFile, " does not fit --model ", c.model, ": ",
                            e.what()));
        }
        const std::string where = r.folder + "/" + train::kTrainStateFile;
        check_resumed_groups(cmd, r.train_state, r.train_metadata, trainable.groups, where);
        const train::ResumePoint p = train::restore_train_state(r.train_state, where, *opt, sched.get(), gen);
        fo.start = {.epoch = p.epoch, .global_step = p.step, .best_acc = p.best_test_acc, .best_epoch = p.best_epoch,
                    .partial = train::read_epoch_progress(r.train_state, where, spe)};
        // lr: the one the last step taken used, as the epoch line and the log report it (the optimizer already holds
        // the next step's, one scheduler step on)
        const double last_lr = sched && p.step > 0 ? sched->lr_at(p.step - 1, 0) : opt->lr();
        const int64_t into = fo.start.partial.steps;
        std::printf("resume %s: %s, step %lld, lr %g (the last step's)\n", r.folder.c_str(),
                    (into ? fmt(into, " of ", spe, " steps into epoch ", p.epoch + 1) : fmt("after epoch ", p.epoch)).c_str(),
                    static_cast<long long>(p.step), last_lr);
        if (p.epoch >= c.epochs) {
            std::printf("nothing to do: the run already has %lld of %lld epochs; hint: raise --epochs (step, multistep "
                        "or none schedules)\n",
                        static_cast<long long>(p.epoch), static_cast<long long>(c.epochs));
            return 0;
        }
        train::check_resumed_optimizer(r.train_state, r.train_metadata, *opt,
                                       r.folder + "/" + train::kTrainStateFile);
        // Restored into the model and the optimizer: holding the checkpoint's tensors for the whole run would keep a
        // second copy of the weights and the optimizer state resident.
        start.resumed.model.clear();
        start.resumed.train_state.clear();
    }

    nlohmann::json config = run_config(specs, args);
    config["model"] = c.model;   // finetune: resolved from the checkpoint when not given
    auto meta = train::model_metadata(c.model, c.data.dataset, data);
    if (finetune) meta["finetuned_from"] = c.from;
    if (depth > 0) meta["depth"] = fmt(depth);
    if (!widths.empty()) meta["widths"] = c.widths;   // razor eval, predict and --resume rebuild the same widths

    // ---- outputs: the log keeps the epochs the checkpoint holds; the curves go next to it ----
    const fs::path log_dir = fs::path(c.log).parent_path();
    const std::string curves_path = ((log_dir.empty() ? fs::path(".") : log_dir) / "curves.svg").string();
    // --overwrite: the old run goes aside now (everything above has been checked) and is deleted after the first
    // checkpoint of the new one, so a kill in between leaves it whole.
    train::OverwrittenRun overwritten;
    if (!start.resuming && c.run.overwrite) {
        const fs::path out(c.run.out);
        overwritten = train::OverwrittenRun(cmd, c.run.out, {(out / "last").string(), (out / "last.old").string(),
                                                             (out / "best").string(), (out / "best.old").string(),
                                                             c.log, curves_path});
    }
    const int64_t done = fo.start.epoch;
    train::RunLog log(cmd, c.log,
                      done > 0 ? std::function<bool(const nlohmann::json&)>([done](const nlohmann::json& j) {
                          return j.contains("epoch") && j["epoch"].is_number() && j["epoch"] <= done;
                      })
                               : nullptr,
                      curves_path);
    // The checkpoint at a position of the loop (fit() adds its fit.* entries and writes it).
    auto state = [&](const train::FitPosition& p) {
        return train::dense_checkpoint(p, {*model, meta, *opt, sched.get(), gen, c.run.seed, config.dump(),
                                           groups_record(trainable.groups)});
    };

    // ---- the loop ----
    train::DenseStep step(*model, *opt, sched.get(), {.label_smoothing = static_cast<float>(c.label_smoothing),
                                                      .clip = c.clip, .step_in_backward = c.step_in_backward});
    train::FitHooks hooks;
    hooks.begin_epoch = [&](int64_t) {
        if (c.freeze_bn) freeze_batchnorm(*model);   // evaluate() switched the whole model back to train()
    };
    hooks.evaluate = [&](int64_t) {
        // The last step's gradients are not used again (every step starts with zero_grad): dropped now, evaluation's
        // activations take their memory instead of adding to it.
        opt->zero_grad();
        return train::evaluate(*model, eval_set, eval_tf, c.run.eval_batch,
                               {.max_batches = c.run.eval_steps, .progress = data.eval_split()});
    };
    hooks.line = train::epoch_line;
    hooks.record = train::epoch_json;
    hooks.state = state;
    hooks.saved = [&](const train::FitPosition&) { overwritten.finish(); };   // the new run has a checkpoint now
    const train::Interrupts interrupts;   // from here on, Ctrl-C checkpoints after the step in flight
    fo.interrupts = &interrupts;
    const train::FitResult result = train::fit(*model, loader, step, log, fo, hooks);
    if (result.stopped) {
        std::printf("stopped after epoch %lld (--stop-after); continue with: %s --resume %s\n",
                    static_cast<long long>(result.last->epoch), cmd.c_str(), c.run.out.c_str());
    }
    const train::EpochSummary& last = *result.last;
    std::printf("\nresult  %s accuracy %s (best %.2f%% at epoch %lld)  |  %.0f img/s on %d thread%s  |  tape peak %s "
                "(dense %s)  |  tensor peak %s  |  peak RSS %s\n",
                data.eval_split().c_str(), last.eval ? (train::fixed(100 * last.eval->accuracy, 2) + "%").c_str() : "-",
                100 * std::max(result.best_acc, 0.0), static_cast<long long>(result.best_epoch), last.img_per_s,
                num_threads(), num_threads() == 1 ? "" : "s", format_bytes(result.tape.stored_bytes).c_str(),
                format_bytes(result.tape.dense_bytes).c_str(), format_bytes(memory_stats().peak_bytes).c_str(),
                format_bytes(peak_rss_bytes()).c_str());
    std::printf("wrote   %s/last/, %s (%s, %s), %s, %s\n", c.run.out.c_str(),
                result.best_epoch > 0 ? (c.run.out + "/best/").c_str() : "no best/ (not evaluated)", train::kModelFile,
                train::kTrainStateFile, c.log.c_str(), log.plot_path().c_str());
    return 0;
}

}  // namespace

int run_train(const std::vector<std::string>& argv) { return run_training(argv, false); }
int run_finetune(const std::vector<std::string>& argv) { return run_training(argv, true); }

}  // namespace razor::apps
