// apps/train_options.cpp -- see train_options.h.
#include "apps/train_options.h"

#include <cmath>
#include <filesystem>

#include "apps/resume.h"
#include "train/data_splits.h"
#include "train/train_state.h"

namespace razor::apps {
namespace {

const FlagTable<OptimiserFlags>& optimiser_flag_family() {
    using F = OptimiserFlags;
    static const FlagTable<F> table =
        FlagTable<F>()
            .text("opt", "sgd", "sgd | adam | adamw", &F::opt)
            .real("lr", "0.1", "learning rate (onecycle: the peak lr)", &F::lr)
            .real("momentum", "0.9", "SGD momentum (adam/adamw: beta1)", &F::momentum)
            .boolean("nesterov", "Nesterov momentum (sgd)", &F::nesterov)
            .real("wd", "5e-4", "weight decay (sgd, adam: L2 in the gradient; adamw: decoupled)", &F::wd);
    return table;
}

const FlagTable<ScheduleFlags>& schedule_flag_family() {
    using F = ScheduleFlags;
    static const FlagTable<F> table =
        FlagTable<F>()
            .text("sched", "onecycle", "onecycle | cosine | step | multistep | none (stepped every iteration)",
                  &F::sched)
            .real("warmup-epochs", "", "onecycle: epochs of rising lr (default 30% of --epochs); others: linear "
                  "warm-up from lr/10 (default 0); may be fractional", &F::warmup)
            .text("milestones", "100,150", "multistep: epochs at which the lr is multiplied by --gamma",
                  &F::milestones_text)
            .integer("step-size", "30", "step: epochs between lr decays by --gamma", &F::step_size)
            .real("gamma", "0.1", "step, multistep: lr decay factor", &F::gamma);
    return table;
}

FlagTable<TrainOptions> make_table(bool finetune) {
    using O = TrainOptions;
    FlagTable<O> t;
    if (finetune)
        t.text("from", "", "the pretrained model: a razor train folder (its last/), a checkpoint folder, or a "
               "weights file (.safetensors, torch.save's .pth/.pt/.bin; torchvision, timm or Hugging Face names); "
               "every tensor is loaded, the head is re-initialised when its class count differs from the data's",
               &O::from);
    t.text("model", finetune ? "" : "resnet20",
           finetune ? "model name (default: the checkpoint's, else read off its keys); must match the checkpoint "
                      "apart from the head"
                    : "model name (razor info --list)",
           &O::model)
        .family(data_flag_family(), &O::data)
        .integer("epochs", finetune ? "10" : "30", "passes over the training set", &O::epochs, true)
        .integer("batch", "128", "images per step", &O::batch)
        .family(optimiser_flag_family(), &O::optimiser)
        .family(schedule_flag_family(), &O::schedule)
        .real("label-smoothing", "0", "cross-entropy label smoothing in [0, 1)", &O::label_smoothing)
        .real("clip", "0", "clip the gradient norm to this value (0 = off)", &O::clip)
        .boolean("step-in-backward", "update each parameter inside backward as soon as its gradient is complete and "
                 "free that gradient: the same updates without holding every gradient at once (a model's size less "
                 "peak memory); not with --clip or --skip-nonfinite", &O::step_in_backward)
        .family(run_flag_family(), &O::run)
        .text("log", "", "JSONL log (default OUT/log.jsonl); the SVG plot goes next to it", &O::log, true)
        .family(razor_flag_family(), &O::razor);
    t.set_default("out", finetune ? "runs/finetune" : "runs/train")
        .set_help("out", "run folder: last/, best/ checkpoints, log.jsonl, curves.svg");
    if (!finetune)
        t.text("widths", "", "CIFAR ResNets and VGGs: train a narrower network from scratch with these conv "
               "out-channels, comma-separated (ResNet: stem, then each block's conv1, conv2 [, shortcut conv]; "
               "VGG: its convs), e.g. a razor sparse-train subnet's 'widths' metadata (default: the zoo's)",
               &O::widths);
    if (finetune) {
        t.set_default("lr", "0.01").set_default("sched", "cosine");
        t.set_help("razor-bn", "Back Razor: train-mode BatchNorm inputs kept dense (fp32, exact BN backward) | f16 "
                   "(dense fp16, half) | int8 (dense int8, one scale per channel, a quarter) | razored (smallest; "
                   "unstable at r >= 0.9); --freeze-bn saves nothing for BN");
        t.boolean("freeze-bn", "BatchNorm layers in eval mode: running statistics frozen, weight and bias not trained, "
                  "nothing saved for backward", &O::freeze_bn);
        t.text("freeze", "", "comma-separated module paths, parameter names or globs (layer1,layer2.*,conv1) whose "
               "parameters are not trained (requires_grad false: no gradient, no optimiser state)", &O::freeze);
        t.text("train-only", "", "train only what these patterns select, freeze the rest: fc (linear probe), bias "
               "(BitFit); a pattern also matches a parameter name's last component", &O::train_only);
        t.real("head-lr-mult", "1", "the classifier head's lr is --lr times this (its own parameter group)",
               &O::head_lr_mult);
        t.boolean("wd-all", "weight decay on every parameter (default: not on biases, norm weights, a ViT's class "
                  "token and position embedding, as timm)", &O::wd_all);
    }
    return t;
}

}  // namespace

const FlagTable<TrainOptions>& train_flag_table(bool finetune) {
    static const FlagTable<TrainOptions> train = make_table(false), tune = make_table(true);
    return finetune ? tune : train;
}

Args train_args(bool finetune) {
    return train_flag_table(finetune).args(
        finetune ? "finetune" : "train",
        finetune ? "fine-tune a pretrained model on new classes (new head; optional Back Razor tape); checkpoints, "
                   "resume, JSONL log and SVG curves in --out"
                 : "train a model from scratch; checkpoints, resume, JSONL log and SVG curves in --out");
}

TrainOptions read_train_options(const Args& args, bool finetune) {
    TrainOptions c = train_flag_table(finetune).read(args);
    c.finetune = finetune;
    if (!finetune) c.wd_all = true;   // razor train's recipes decay every parameter (PyTorch's CIFAR scripts)
    if (c.run.eval_batch == 0) c.run.eval_batch = c.batch;   // evaluation holds no tape: below training's memory
    c.command = finetune ? "razor finetune" : "razor train";
    const std::string& cmd = c.command;
    const OptimiserFlags& o = c.optimiser;
    const ScheduleFlags& s = c.schedule;
    c.warmup_epochs = s.warmup ? *s.warmup : (s.sched == "onecycle" ? 0.3 * c.epochs : 0.0);
    if (c.log.empty()) c.log = (std::filesystem::path(c.run.out) / "log.jsonl").string();

    check_data_flags(cmd, c.data);
    require_one_of(cmd, "opt", o.opt, {"sgd", "adam", "adamw"});
    require_one_of(cmd, "sched", s.sched, {"onecycle", "cosine", "step", "multistep", "none"});
    require(cmd, c.epochs >= 1, "epochs", c.epochs, ">= 1");
    require(cmd, c.epochs <= kMaxEpochs, "epochs", c.epochs, fmt("<= ", kMaxEpochs));
    require(cmd, c.batch >= 1, "batch", c.batch, ">= 1");
    require(cmd, c.batch <= kMaxCount, "batch", c.batch, fmt("<= ", kMaxCount));
    require(cmd, o.lr > 0, "lr", o.lr, "> 0");
    require(cmd, o.momentum >= 0 && o.momentum < 1, "momentum", o.momentum, "in [0, 1)");
    require(cmd, o.wd >= 0, "wd", o.wd, ">= 0");
    require(cmd, s.gamma > 0 && s.gamma <= 1, "gamma", s.gamma, "in (0, 1]");
    require(cmd, c.label_smoothing >= 0 && c.label_smoothing < 1, "label-smoothing", c.label_smoothing, "in [0, 1)");
    require(cmd, c.clip >= 0, "clip", c.clip, ">= 0 (0 = off)");
    require(cmd, c.head_lr_mult > 0, "head-lr-mult", c.head_lr_mult, "> 0");
    if (c.step_in_backward && c.clip > 0)
        throw Error(fmt(cmd, ": --step-in-backward updates each parameter before the norm over all gradients is "
                        "known, so it cannot --clip ", c.clip, "; hint: drop one of them"));
    if (c.step_in_backward && c.run.skip_nonfinite)
        throw Error(fmt(cmd, ": --step-in-backward has updated parameters before a non-finite gradient is seen, so "
                        "that step cannot be skipped (--skip-nonfinite); hint: drop one of them"));
    check_run_flags(cmd, c.run);
    require(cmd, s.step_size >= 1, "step-size", s.step_size, ">= 1");
    require(cmd, c.warmup_epochs >= 0 && c.warmup_epochs < c.epochs, "warmup-epochs", c.warmup_epochs,
            fmt("in [0, --epochs ", c.epochs, ")"));
    if (s.sched == "onecycle")
        require(cmd, c.warmup_epochs > 0, "warmup-epochs", c.warmup_epochs, "> 0 for onecycle (the rising phase)");
    if (o.nesterov && (o.opt != "sgd" || o.momentum <= 0))
        throw Error(fmt(cmd, ": --nesterov needs --opt sgd and --momentum > 0, got --opt ", o.opt, " --momentum ",
                        o.momentum, "; hint: drop --nesterov or set --momentum 0.9"));
    if (finetune && c.from.empty())
        throw Error(fmt(cmd, ": --from is required: the pretrained model to start from; hint: --from runs/pretrain "
                        "(a razor train folder) or --from model.safetensors"));
    if (s.sched == "multistep") {
        for (double m : train::parse_number_list(cmd, "milestones", s.milestones_text)) {
            require(cmd, m >= 1 && m == std::floor(m), "milestones", s.milestones_text, "whole epochs >= 1");
            c.milestones.push_back(static_cast<int64_t>(m));
        }
        require(cmd, !c.milestones.empty(), "milestones", "(empty)", "a list of epochs such as 100,150");
    }
    return c;
}

// --epochs may change on resume only for schedules not laid out over all epochs.
void check_resumed_epochs(const TrainOptions& c, const std::string& config_json) {
    const auto stored = train::parse_run_config(config_json, fmt(c.command, ": ", c.run.resume));
    const std::string& sched = c.schedule.sched;
    if (stored.count("epochs") && !same_flag_value(stored.at("epochs"), fmt(c.epochs)) &&
        (sched == "onecycle" || sched == "cosine"))
        throw Error(fmt(c.command, ": --epochs ", c.epochs, " differs from the resumed run's ", stored.at("epochs"),
                        ", and the ", sched, " schedule is laid out over all epochs; hint: keep --epochs, or use "
                        "--sched step/multistep/none to extend a run"));
}

// A resumed run trains on what its checkpoint learned: the same classes, in the same label order, at the same size.
void check_resumed_data(const std::string& cmd, const train::Checkpoint& r, const train::DataSplits& data) {
    const std::vector<std::string> stored = train::metadata_class_names(r.model_metadata);
    if (!stored.empty() && !data.train.classes.empty() && stored != data.train.classes)
        throw Error(fmt(cmd, ": ", data.train.name, " has the classes ", train::join_names(data.train.classes),
                        " but the resumed checkpoint ", r.folder, " was trained on ", train::join_names(stored),
                        " (labels are positions in this list); expected the same classes in the same order; hint: "
                        "pass the --data and --classes the run was started with"));
    const auto size = r.model_metadata.find("image_size");
    if (size != r.model_metadata.end() && size->second != fmt(data.image_size))
        throw Error(fmt(cmd, ": the resumed checkpoint ", r.folder, " was trained at ", size->second, " px, but ",
                        data.train.name, " gives ", data.image_size, " px; expected the same size; hint: pass "
                        "--image-size ", size->second));
}

// Every schedule is stepped once per iteration; epochs convert to iterations with `spe` steps per epoch.
std::unique_ptr<optim::LRScheduler> make_scheduler(const TrainOptions& t, optim::Optimizer& opt, int64_t spe) {
    const ScheduleFlags& c = t.schedule;
    const int64_t total = t.epochs * spe;
    const int64_t warmup = std::llround(t.warmup_epochs * spe);
    if (c.sched == "onecycle") {
        optim::OneCycleOptions o;
        o.max_lr = opt.lrs();   // each group's peak: --lr, the head's --lr x --head-lr-mult
        o.total_steps = total;
        o.pct_start = t.warmup_epochs / t.epochs;
        o.cycle_momentum = false;   // --momentum stays as given (the recipe's Nesterov 0.9)
        return std::make_unique<optim::OneCycleLR>(opt, optim::one_cycle_for_any_length(o));
    }
    std::unique_ptr<optim::LRScheduler> after;
    if (c.sched == "cosine") after = std::make_unique<optim::CosineAnnealingLR>(opt, std::max<int64_t>(total - warmup, 1));
    if (c.sched == "step") after = std::make_unique<optim::StepLR>(opt, c.step_size * spe, c.gamma);
    if (c.sched == "multistep") {
        std::vector<int64_t> steps;
        for (int64_t m : t.milestones) steps.push_back(m * spe - warmup);
        after = std::make_unique<optim::MultiStepLR>(opt, steps, c.gamma);
    }
    if (warmup > 0) return std::make_unique<optim::LinearWarmup>(opt, warmup, 0.1, std::move(after));
    return after;
}

}  // namespace razor::apps
