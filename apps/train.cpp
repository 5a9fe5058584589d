// apps/train.cpp -- `razor train`: train a zoo model on CIFAR-10/100, Fashion-MNIST or an image folder, with
// checkpoints, bit-exact resume, a JSONL log and an SVG plot of the curves. `razor finetune` (apps/finetune.cpp) runs
// this same loop on a pretrained backbone with a new head (--from, --freeze-bn, fine-tuning defaults).
//
// reference: the usual PyTorch CIFAR script (torchvision RandomCrop(32, 4) + RandomHorizontalFlip, SGD with Nesterov
// momentum and weight decay, an lr schedule stepped once per iteration); bench/train_cifar_torch.py is its PyTorch
// twin. docs: docs/cli.md (flags, files, resume), docs/recipes.md (schedules and measured accuracy).
//
// The loop is PyTorch-shaped: zero_grad, forward, loss, backward, [clip], step, scheduler step. Schedules are stepped
// per iteration; --warmup-epochs, --milestones and --step-size are in epochs and converted to iterations.
//
// Resume: every epoch ends with a checkpoint in OUT/last (apps/checkpoint.h) holding the weights, the optimizer and
// scheduler state, the epoch and step, the RNG states and this run's flags. `--resume OUT` restores all of it and
// continues with the next epoch; the data loader's order and augmentation are a function of (seed, epoch), so the
// continued run is bit-for-bit the run that was never interrupted (same --threads). Flags that would change the
// computation must match the checkpoint's (or be left out); --threads, --out, --log, --data, --eval-every,
// --stop-after, --workers and --eval-batch may change, and --epochs may for schedules that do not depend on it.
//
// --razor R (both commands) trains under Back Razor's save policy (sparse/razor_policy.h): the forward is unchanged,
// the tape keeps each saved activation pruned to its top (1 - R) per sample. The progress and epoch lines show the
// tape's stored bytes against the dense-equivalent bytes and their ratio.
#include <cmath>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/args.h"
#include "apps/checkpoint.h"
#include "apps/commands.h"
#include "apps/finetune.h"
#include "apps/nonfinite.h"
#include "apps/plot.h"
#include "apps/progress.h"
#include "apps/resume.h"
#include "apps/train_common.h"
#include "apps/train_state.h"
#include "core/core.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "models/registry.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/scheduler.h"
#include "optim/sgd.h"

namespace razor::apps {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// "razor train", or "razor finetune" while run_training(finetune = true) runs (it prefixes every error message).
const char* kCmd = "razor train";

const std::vector<FlagSpec>& flag_specs(bool finetune) {
    static const std::vector<FlagSpec> train = {
        {"model", "resnet20", "model name (razor info --list)"},
        {"dataset", "cifar10", "cifar10 | cifar100 | fashion-mnist | folder (ROOT/{train,test}/CLASS/*.png)"},
        {"data", "", "dataset folder (cifar10: the folder holding data_batch_1.bin)", false, true},
        {"classes", "", "keep only these classes, relabelled 0..k-1: indices (2,3,4) or names (cat,dog)"},
        {"epochs", "30", "passes over the training set", false, true},
        {"batch", "128", "images per step"},
        {"opt", "sgd", "sgd | adam | adamw"},
        {"lr", "0.1", "learning rate (onecycle: the peak lr)"},
        {"momentum", "0.9", "SGD momentum (adam/adamw: beta1)"},
        {"nesterov", "", "Nesterov momentum (sgd)", true},
        {"wd", "5e-4", "weight decay (sgd, adam: L2 in the gradient; adamw: decoupled)"},
        {"sched", "onecycle", "onecycle | cosine | step | multistep | none (stepped every iteration)"},
        {"warmup-epochs", "", "onecycle: epochs of rising lr (default 30% of --epochs); others: linear warm-up "
                              "from lr/10 (default 0); may be fractional"},
        {"milestones", "100,150", "multistep: epochs at which the lr is multiplied by --gamma"},
        {"step-size", "30", "step: epochs between lr decays by --gamma"},
        {"gamma", "0.1", "step, multistep: lr decay factor"},
        {"label-smoothing", "0", "cross-entropy label smoothing in [0, 1)"},
        {"clip", "0", "clip the gradient norm to this value (0 = off)"},
        {"augment", "crop+flip", "crop+flip (pad 4, random crop, horizontal flip) | none"},
        {"threads", "0", "OpenMP threads (0 = all cores); resume bit-exactly with the same count", false, true},
        {"workers", "1", "data loader threads building batches ahead", false, true},
        {"seed", "0", "seed for init, shuffling and augmentation"},
        {"out", "runs/train", "run folder: last/, best/ checkpoints, log.jsonl, curves.svg", false, true},
        {"log", "", "JSONL log (default OUT/log.jsonl); the SVG plot goes next to it", false, true},
        {"resume", "", "continue the run in this folder (its last/ checkpoint) where it stopped", false, true},
        {"eval-every", "1", "evaluate on the test set every N epochs (and after the last; 0 = only after the last)",
         false, true},
        {"eval-batch", "500", "images per evaluation batch", false, true},
        {"steps-per-epoch", "0", "stop each epoch after N steps (0 = the whole training set; for quick runs)"},
        {"overwrite", "", "start a new run in an --out that already holds a checkpoint (its files are replaced as "
                          "the new run writes them)", true, true},
        {"stop-after", "0", "stop after this epoch with a checkpoint, to continue later with --resume (0 = off)",
         false, true},
        {"skip-nonfinite", "", "on a NaN/Inf loss or gradient: report the op, skip the optimizer step and go on "
                               "(gives up after 20 such steps in a row); default: stop", true, true},
        {"razor", "0", kRazorHelp},
        {"razor-values", "fp32", kRazorValuesHelp},
        {"razor-gelu", "d4", kRazorGeluHelp},
        {"razor-bn", "dense", kRazorBnHelp},
        {"razor-attn", "int8", kRazorAttnHelp},
    };
    // Fine-tuning: the same flags plus --from and --freeze-bn, with shorter, gentler defaults.
    static const std::vector<FlagSpec> tune = [] {
        std::vector<FlagSpec> s = train;
        const std::map<std::string, const char*> defaults = {
            {"model", ""}, {"epochs", "10"}, {"lr", "0.01"}, {"sched", "cosine"}, {"out", "runs/finetune"}};
        for (FlagSpec& f : s)
            if (auto it = defaults.find(f.name); it != defaults.end()) f.value = it->second;
        s.front().help = "model name (default: the checkpoint's); must match the checkpoint apart from the head";
        s.insert(s.begin(), {"from", "", "the pretrained model: a razor train folder (its last/), a checkpoint "
                                         "folder or a model.safetensors; every tensor but the classifier head's is "
                                         "loaded, the head is re-initialised for --classes"});
        s.push_back({"freeze-bn", "", "BatchNorm layers in eval mode: running statistics frozen, weight and bias not "
                                      "trained, nothing saved for backward", true});
        return s;
    }();
    return finetune ? tune : train;
}

Args make_args(bool finetune) {
    return make_flag_args(finetune ? "finetune" : "train",
                          finetune ? "fine-tune a pretrained model on new classes (new head; optional Back Razor "
                                     "tape); checkpoints, resume, JSONL log and SVG curves in --out"
                                   : "train a model from scratch; checkpoints, resume, JSONL log and SVG curves in --out",
                          flag_specs(finetune));
}

// On --resume: the checkpoint's flags, except those given now that may change; a given flag that may not change
// must equal the stored one. Returns the flags re-parsed.
Args reconcile(const Args& given, const std::string& config_json, const std::string& resume, const std::string& root,
               bool finetune) {
    const std::map<std::string, std::string> stored = parse_run_config(config_json, fmt(kCmd, ": ", resume));
    const std::vector<std::string> argv = reconcile_flags(kCmd, flag_specs(finetune), given, config_json, resume, root);
    Args args = make_args(finetune);
    args.parse(argv);
    if (stored.count("epochs") && !same_flag_value(stored.at("epochs"), args.str("epochs"))) {
        const std::string sched = args.str("sched");
        if (sched == "onecycle" || sched == "cosine")
            throw Error(fmt(kCmd, ": --epochs ", args.str("epochs"), " differs from the resumed run's ",
                            stored.at("epochs"), ", and the ", sched,
                            " schedule is laid out over all epochs; hint: keep --epochs, or use --sched "
                            "step/multistep/none to extend a run"));
    }
    return args;
}

struct Config {
    std::string model, dataset, data, classes, opt, sched, augment, out, log;
    int64_t epochs, batch, threads, workers, seed, eval_every, eval_batch, steps_per_epoch, stop_after, step_size;
    double lr, momentum, wd, warmup_epochs, gamma, label_smoothing, clip;
    bool nesterov, warmup_given, skip_nonfinite;
    RazorFlags razor;                    // --razor (0 = dense tape), --razor-values, -gelu, -bn, -attn
    std::string from;                    // finetune: the pretrained model
    bool finetune = false, freeze_bn = false;
    std::vector<int64_t> milestones;
};

template <class T>
void require(bool ok, const std::string& flag, const T& got, const std::string& expected) {
    if (!ok) throw Error(fmt(kCmd, ": --", flag, " must be ", expected, ", got ", got));
}

void require_one_of(const std::string& flag, const std::string& got, const std::vector<std::string>& valid) {
    std::string list;
    bool ok = false;
    for (const auto& v : valid) list += (list.empty() ? "" : " | ") + v, ok = ok || v == got;
    if (!ok) throw Error(fmt(kCmd, ": --", flag, " must be one of ", list, "; got '", got, "'"));
}

Config read_config(const Args& a, bool finetune) {
    Config c;
    c.finetune = finetune;
    c.razor = razor_flags(a);
    if (finetune) c.from = a.str("from"), c.freeze_bn = a.on("freeze-bn");
    c.model = a.str("model"), c.dataset = a.str("dataset"), c.data = a.str("data"), c.classes = a.str("classes");
    c.opt = a.str("opt"), c.sched = a.str("sched"), c.augment = a.str("augment"), c.out = a.str("out");
    c.epochs = a.integer("epochs"), c.batch = a.integer("batch"), c.threads = a.integer("threads");
    c.workers = a.integer("workers"), c.seed = a.integer("seed"), c.eval_every = a.integer("eval-every");
    c.eval_batch = a.integer("eval-batch"), c.steps_per_epoch = a.integer("steps-per-epoch");
    c.stop_after = a.integer("stop-after"), c.step_size = a.integer("step-size");
    c.lr = a.real("lr"), c.momentum = a.real("momentum"), c.wd = a.real("wd"), c.gamma = a.real("gamma");
    c.label_smoothing = a.real("label-smoothing"), c.clip = a.real("clip"), c.nesterov = a.on("nesterov");
    c.skip_nonfinite = a.on("skip-nonfinite");
    c.warmup_given = !a.str("warmup-epochs").empty();
    c.warmup_epochs = c.warmup_given ? a.real("warmup-epochs") : (c.sched == "onecycle" ? 0.3 * c.epochs : 0.0);
    c.log = a.str("log").empty() ? (fs::path(c.out) / "log.jsonl").string() : a.str("log");

    require_one_of("dataset", c.dataset, kDatasetNames);
    require_one_of("opt", c.opt, {"sgd", "adam", "adamw"});
    require_one_of("sched", c.sched, {"onecycle", "cosine", "step", "multistep", "none"});
    require_one_of("augment", c.augment, {"crop+flip", "none"});
    require(c.epochs >= 1, "epochs", c.epochs, ">= 1");
    require(c.batch >= 1, "batch", c.batch, ">= 1");
    require(c.lr > 0, "lr", c.lr, "> 0");
    require(c.momentum >= 0 && c.momentum < 1, "momentum", c.momentum, "in [0, 1)");
    require(c.wd >= 0, "wd", c.wd, ">= 0");
    require(c.gamma > 0 && c.gamma <= 1, "gamma", c.gamma, "in (0, 1]");
    require(c.label_smoothing >= 0 && c.label_smoothing < 1, "label-smoothing", c.label_smoothing, "in [0, 1)");
    require(c.clip >= 0, "clip", c.clip, ">= 0 (0 = off)");
    require(c.threads >= 0, "threads", c.threads, ">= 0 (0 = all cores)");
    require(c.workers >= 0, "workers", c.workers, ">= 0");
    require(c.seed >= 0, "seed", c.seed, ">= 0");
    require(c.eval_every >= 0, "eval-every", c.eval_every, ">= 0");
    require(c.eval_batch >= 1, "eval-batch", c.eval_batch, ">= 1");
    require(c.steps_per_epoch >= 0, "steps-per-epoch", c.steps_per_epoch, ">= 0 (0 = the whole set)");
    require(c.stop_after >= 0, "stop-after", c.stop_after, ">= 0 (0 = off)");
    require(c.step_size >= 1, "step-size", c.step_size, ">= 1");
    require(c.warmup_epochs >= 0 && c.warmup_epochs < c.epochs, "warmup-epochs", c.warmup_epochs,
            fmt("in [0, --epochs ", c.epochs, ")"));
    if (c.sched == "onecycle")
        require(c.warmup_epochs > 0, "warmup-epochs", c.warmup_epochs, "> 0 for onecycle (the rising phase)");
    if (c.nesterov && (c.opt != "sgd" || c.momentum <= 0))
        throw Error(fmt(kCmd, ": --nesterov needs --opt sgd and --momentum > 0, got --opt ", c.opt, " --momentum ",
                        c.momentum, "; hint: drop --nesterov or set --momentum 0.9"));
    if (finetune && c.from.empty())
        throw Error(fmt(kCmd, ": --from is required: the pretrained model to start from; hint: --from runs/pretrain "
                        "(a razor train folder) or --from model.safetensors"));
    if (c.sched == "multistep") {
        for (double m : parse_number_list(kCmd, "milestones", a.str("milestones"))) {
            require(m >= 1 && m == std::floor(m), "milestones", a.str("milestones"), "whole epochs >= 1");
            c.milestones.push_back(static_cast<int64_t>(m));
        }
        require(!c.milestones.empty(), "milestones", "(empty)", "a list of epochs such as 100,150");
    }
    return c;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const optim::NamedParameters& params) {
    if (c.opt == "sgd")
        return std::make_unique<optim::SGD>(
            params, optim::SGDOptions{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.wd, .nesterov = c.nesterov});
    if (c.opt == "adam") {
        optim::AdamOptions o;
        o.lr = c.lr, o.betas = {c.momentum, 0.999}, o.weight_decay = c.wd;
        return std::make_unique<optim::Adam>(params, o);
    }
    optim::AdamWOptions o;
    o.lr = c.lr, o.betas = {c.momentum, 0.999}, o.weight_decay = c.wd;
    return std::make_unique<optim::AdamW>(params, o);
}

// Every schedule is stepped once per iteration; epochs convert to iterations with `spe` steps per epoch.
std::unique_ptr<optim::LRScheduler> make_scheduler(const Config& c, optim::Optimizer& opt, int64_t spe) {
    const int64_t total = c.epochs * spe;
    const int64_t warmup = std::llround(c.warmup_epochs * spe);
    if (c.sched == "onecycle") {
        optim::OneCycleOptions o;
        o.max_lr = {c.lr};
        o.total_steps = total;
        o.pct_start = c.warmup_epochs / c.epochs;
        o.cycle_momentum = false;   // --momentum stays as given (the recipe's Nesterov 0.9)
        return std::make_unique<optim::OneCycleLR>(opt, o);
    }
    std::unique_ptr<optim::LRScheduler> after;
    if (c.sched == "cosine") after = std::make_unique<optim::CosineAnnealingLR>(opt, std::max<int64_t>(total - warmup, 1));
    if (c.sched == "step") after = std::make_unique<optim::StepLR>(opt, c.step_size * spe, c.gamma);
    if (c.sched == "multistep") {
        std::vector<int64_t> steps;
        for (int64_t m : c.milestones) steps.push_back(m * spe - warmup);
        after = std::make_unique<optim::MultiStepLR>(opt, steps, c.gamma);
    }
    if (warmup > 0) return std::make_unique<optim::LinearWarmup>(opt, warmup, 0.1, std::move(after));
    return after;
}

// One epoch's record: the stdout line and the JSONL entry carry the same fields.
struct EpochRecord {
    int64_t epoch = 0, epochs = 0, step = 0, skipped = 0;   // skipped: non-finite steps (--skip-nonfinite)
    double loss = 0, train_acc = 0, lr = 0, seconds = 0, eval_seconds = 0, img_per_s = 0;
    bool evaluated = false;
    double test_acc = 0, test_loss = 0;
    int64_t tape_bytes = 0, tape_dense_bytes = 0, rss_bytes = 0, peak_rss_bytes = 0, peak_tensor_bytes = 0;

    json to_json() const {
        json j = {{"epoch", epoch},           {"epochs", epochs},
                  {"step", step},             {"loss", loss},
                  {"train_acc", train_acc},   {"test_acc", nullptr},
                  {"test_loss", nullptr},     {"lr", lr},
                  {"seconds", seconds},       {"eval_seconds", eval_seconds},
                  {"img_per_s", img_per_s},   {"tape_bytes", tape_bytes},
                  {"tape_dense_bytes", tape_dense_bytes},
                  {"tape_ratio", tape_bytes ? double(tape_dense_bytes) / tape_bytes : 0.0},
                  {"rss_bytes", rss_bytes},   {"peak_rss_bytes", peak_rss_bytes},
                  {"peak_tensor_bytes", peak_tensor_bytes}};
        if (evaluated) j["test_acc"] = test_acc, j["test_loss"] = test_loss;
        if (skipped) j["skipped_steps"] = skipped;
        return j;
    }
    std::string line() const {
        const double ratio = tape_bytes ? double(tape_dense_bytes) / tape_bytes : 0;
        return fmt("epoch ", epoch, "/", epochs, "  loss ", fixed(loss, 4), "  train ", fixed(100 * train_acc, 1),
                   "%  test ", evaluated ? fixed(100 * test_acc, 1) + "%" : std::string("-"), "  lr ", general(lr),
                   "  ", fixed(seconds, 0), " s  ", fixed(img_per_s, 0), " img/s  tape ", format_bytes(tape_bytes),
                   " (dense ", format_bytes(tape_dense_bytes), ", ", fixed(ratio, 1), "x)  rss ",
                   format_bytes(rss_bytes)) +
               (skipped ? fmt("  skipped ", skipped, " non-finite steps") : std::string());
    }
    static std::string fixed(double v, int digits) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.*f", digits, v);
        return buf;
    }
    static std::string general(double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3g", v);
        return buf;
    }
};

struct Curves {
    Series loss{"train loss", {}, {}}, test_loss{"test loss", {}, {}}, train{"train", {}, {}}, test{"test", {}, {}},
        lr{"lr", {}, {}};
    void add(const json& j) {
        const double e = j.at("epoch").get<double>();
        loss.x.push_back(e), loss.y.push_back(j.at("loss").get<double>());
        train.x.push_back(e), train.y.push_back(100 * j.at("train_acc").get<double>());
        lr.x.push_back(e), lr.y.push_back(j.at("lr").get<double>());
        if (!j.at("test_acc").is_null()) {
            test.x.push_back(e), test.y.push_back(100 * j.at("test_acc").get<double>());
            test_loss.x.push_back(e), test_loss.y.push_back(j.at("test_loss").get<double>());
        }
    }
    void write(const std::string& path) const {
        write_svg_plot(path, {{"loss", "epoch", "cross-entropy", {loss, test_loss}},
                              {"accuracy", "epoch", "%", {train, test}},
                              {"learning rate", "epoch", "lr", {lr}}});
    }
};

}  // namespace

int run_train(const std::vector<std::string>& argv) { return run_training(argv, false); }

int run_training(const std::vector<std::string>& argv, bool finetune) {
    struct CommandName {   // error messages say which command failed
        explicit CommandName(bool f) { kCmd = f ? "razor finetune" : "razor train"; }
        ~CommandName() { kCmd = "razor train"; }
    } command_name(finetune);
    Args args = make_args(finetune);
    args.parse(argv);
    if (args.help_requested()) {
        std::printf("%s", args.usage().c_str());
        return 0;
    }
    Checkpoint resumed;
    const bool resuming = !args.str("resume").empty();
    if (resuming) {
        resumed = open_checkpoint(args.str("resume"));
        const ResumedRun run = resumed_run(resumed);
        args = reconcile(args, run.config_json, args.str("resume"), run.root, finetune);
    }
    Config c = read_config(args, finetune);
    if (!resuming && !args.on("overwrite") && (fs::exists(fs::path(c.out) / "last") || fs::exists(fs::path(c.out) / "last.old")))
        throw Error(fmt(kCmd, ": ", c.out, " already holds a run (", c.out, "/last); hint: continue it with --resume ",
                        c.out, ", pick another --out, or pass --overwrite to start over"));
    // The tape's save policy for everything this thread records (evaluation records nothing: NoGradGuard).
    SavePolicyGuard save_policy(razor_policy_from_flags(kCmd, c.razor));
    // Fine-tuning starts from --from (a resumed run from its own checkpoint); --model defaults to the checkpoint's.
    Checkpoint pretrained;
    if (finetune && (!resuming || c.model.empty())) {
        pretrained = open_checkpoint(c.from, true);
        if (c.model.empty()) {
            auto it = pretrained.model_metadata.find("model");
            if (it == pretrained.model_metadata.end())
                throw Error(fmt(kCmd, ": --from ", c.from, " does not record its model; hint: pass --model"));
            c.model = it->second;
        }
    }
    set_num_threads(static_cast<int>(c.threads));
    std::printf("%s\n", runtime_banner().c_str());

    // ---- data ----
    const DataSplits data = load_splits(kCmd, c.dataset, c.data, c.classes);
    const Shape image = data.train.image_shape();   // (C, H, W)
    if (image[1] != image[2])
        throw Error(fmt(kCmd, ": the models take square images, ", data.train.name, " has ", shape_str(image),
                        "; hint: resize the folder's images"));
    std::printf("data   %s: %lld train, %lld test images %s, %lld classes, normalise mean (%s) std (%s)\n",
                c.dataset.c_str(), static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
                shape_str(image).c_str(), static_cast<long long>(data.train.num_classes),
                join_floats(data.mean).c_str(), join_floats(data.std).c_str());
    std::vector<data::TransformPtr> tf;
    if (c.augment == "crop+flip") tf = {data::random_crop(image[1], 4), data::random_horizontal_flip()};
    tf.push_back(data::to_float_transform());
    tf.push_back(data::normalize_transform(data.mean, data.std));
    data::DataLoader loader(data.train, data::compose(tf),
                            {.batch_size = c.batch, .shuffle = true, .drop_last = false,
                             .seed = static_cast<uint64_t>(c.seed), .workers = c.workers});
    const int64_t spe = c.steps_per_epoch > 0 ? std::min(c.steps_per_epoch, loader.size()) : loader.size();

    // ---- model, optimizer, schedule ----
    Generator gen(static_cast<uint64_t>(c.seed));
    manual_seed(static_cast<uint64_t>(c.seed));
    auto model = models::make_model(c.model, data.train.num_classes, gen, {.in_channels = image[0], .image_size = image[1]});
    if (finetune && !resuming) {
        const PretrainedLoad loaded = load_pretrained(kCmd, c.from, *model, pretrained);
        std::printf("from   %s: %lld tensors loaded; head '%s' re-initialised, %s -> %lld classes\n", c.from.c_str(),
                    static_cast<long long>(loaded.loaded), loaded.head.c_str(),
                    loaded.source_head_weight.empty() ? "?" : fmt(loaded.source_head_weight[0]).c_str(),
                    static_cast<long long>(data.train.num_classes));
    }
    if (c.freeze_bn)
        std::printf("freeze %lld BatchNorm2d layers (eval mode, weight and bias not trained)\n",
                    static_cast<long long>(freeze_batchnorm(*model)));
    optim::NamedParameters trained;   // all but frozen ones
    for (const auto& [name, p] : model->named_parameters())
        if (p.requires_grad()) trained.emplace_back(name, p);
    auto opt = make_optimizer(c, trained);
    auto sched = make_scheduler(c, *opt, spe);
    std::printf("model  %s: %lld parameters (%s)\n", c.model.c_str(), static_cast<long long>(model->num_parameters()),
                format_bytes(model->num_parameters() * 4).c_str());
    std::printf("train  %s lr %g momentum %g%s wd %g | %s (warm-up %g epochs) | %lld epochs x %lld steps of %lld | "
                "augment %s | label smoothing %g | clip %g | seed %lld\n",
                c.opt.c_str(), c.lr, c.momentum, c.nesterov ? " nesterov" : "", c.wd, c.sched.c_str(), c.warmup_epochs,
                static_cast<long long>(c.epochs), static_cast<long long>(spe), static_cast<long long>(c.batch),
                c.augment.c_str(), c.label_smoothing, c.clip, static_cast<long long>(c.seed));

    int64_t start_epoch = 0, global_step = 0, best_epoch = 0;
    double best_acc = -1;
    if (resuming) {
        const std::string where = resumed.folder + "/" + kTrainStateFile;
        try {
            model->load_state_dict(resumed.model);
        } catch (const Error& e) {
            throw Error(fmt(kCmd, ": ", resumed.folder, "/", kModelFile, " does not fit --model ", c.model, ": ",
                            e.what()));
        }
        const ResumePoint p = restore_train_state(resumed.train_state, where, *opt, sched.get(), gen);
        start_epoch = p.epoch, global_step = p.step, best_epoch = p.best_epoch, best_acc = p.best_test_acc;
        std::printf("resume %s: after epoch %lld, step %lld, lr %g\n", resumed.folder.c_str(),
                    static_cast<long long>(start_epoch), static_cast<long long>(global_step), opt->lr());
        if (start_epoch >= c.epochs) {
            std::printf("nothing to do: the run already has %lld of %lld epochs; hint: raise --epochs (step, multistep "
                        "or none schedules)\n",
                        static_cast<long long>(start_epoch), static_cast<long long>(c.epochs));
            return 0;
        }
    }

    // ---- outputs ----
    fs::create_directories(c.out);
    Curves curves;
    // On resume the log keeps the epochs the checkpoint holds (a later epoch that was logged but never checkpointed is
    // dropped) and the curves are rebuilt from them; a fresh run starts an empty log.
    std::function<bool(const json&)> keep;
    if (start_epoch > 0)
        keep = [&](const json& j) { return j.contains("epoch") && j["epoch"].is_number() && j["epoch"] <= start_epoch; };
    for (const json& j : trim_log(c.log, keep)) curves.add(j);
    std::ofstream log(c.log, std::ios::app);
    if (!log) throw Error(fmt(kCmd, ": cannot open ", c.log, " for writing; hint: check --log / --out"));
    const fs::path log_dir = fs::path(c.log).parent_path();
    const std::string plot_path = ((log_dir.empty() ? fs::path(".") : log_dir) / "curves.svg").string();
    json config = run_config(flag_specs(finetune), args);
    config["model"] = c.model;   // finetune: resolved from the checkpoint when not given
    std::map<std::string, std::string> model_meta = {
        {"format", "pt"},   // safetensors.torch's marker: plain PyTorch tensors
        {"model", c.model},
        {"dataset", c.dataset},
        {"num_classes", fmt(data.train.num_classes)},
        {"in_channels", fmt(image[0])},
        {"image_size", fmt(image[1])},
        {"normalize_mean", join_floats(data.mean)},
        {"normalize_std", join_floats(data.std)}};
    std::string names;
    for (const auto& n : data.train.classes) names += (names.empty() ? "" : ",") + n;
    model_meta["classes"] = names;
    if (finetune) model_meta["finetuned_from"] = c.from;

    auto save = [&](const std::string& name, int64_t epoch) {
        Checkpoint ck;
        ck.model = model->state_dict();
        ck.model_metadata = model_meta;
        ck.model_metadata["epoch"] = fmt(epoch);
        for (const auto& [k, v] : opt->state_dict()) ck.train_state["optimizer." + k] = v;
        if (sched)
            for (const auto& [k, v] : sched->state_dict()) ck.train_state["scheduler." + k] = v;
        ck.train_state["epoch"] = i64_scalar(epoch);
        ck.train_state["step"] = i64_scalar(global_step);
        ck.train_state["rng.default"] = pack_generator_state(default_generator().state());
        ck.train_state["rng.init"] = pack_generator_state(gen.state());
        ck.train_state["loader.seed"] = i64_scalar(c.seed);
        ck.train_state["loader.epoch"] = i64_scalar(epoch);   // the next epoch's index (0-based)
        ck.train_state["best_test_acc"] = optim::pack_f64(best_acc);
        ck.train_state["best_epoch"] = i64_scalar(best_epoch);
        ck.train_metadata = {{"config", config.dump()},
                             {"epoch", fmt(epoch)},
                             {"step", fmt(global_step)},
                             {"optimizer", opt->type_name()},
                             {"scheduler", sched ? sched->type_name() : "none"}};
        save_checkpoint(c.out, name, ck);
    };

    // ---- the loop ----
    const float smoothing = static_cast<float>(c.label_smoothing);
    EpochRecord last;
    TapeTotals tape_peak;
    NonFiniteGuard nonfinite(*model, {.skip = c.skip_nonfinite});
    for (int64_t epoch = start_epoch + 1; epoch <= c.epochs; ++epoch) {
        loader.set_epoch(epoch - 1);   // the order and augmentation of epoch e depend on (seed, e) only
        if (c.freeze_bn) freeze_batchnorm(*model);   // evaluate() switched the whole model back to train()
        Progress progress(fmt("epoch ", epoch, "/", c.epochs), spe, c.batch);
        EpochRecord r;
        r.epoch = epoch, r.epochs = c.epochs, r.lr = opt->lr();
        double loss_sum = 0;
        int64_t correct = 0, seen = 0, step = 0;
        TapeTotals tape;
        for (data::Batch& b : loader) {
            if (step >= spe) break;
            current_tape().reset_peak();
            r.lr = opt->lr();   // the lr this step uses
            nonfinite.begin_step();
            opt->zero_grad();
            Tensor logits = (*model)(b.images);                                // (B, K)
            Tensor loss = cross_entropy(logits, b.labels, smoothing);
            const float loss_value = loss.item();
            // A non-finite loss or gradient: re-run the step to name the op (apps/nonfinite.h), then stop or skip.
            std::string fault;
            if (!std::isfinite(loss_value)) fault = fmt(kCmd, ": the loss became ", loss_value);
            else {
                loss.backward();
                if (c.clip > 0) {
                    const double norm = optim::clip_grad_norm_(opt->params(), c.clip);
                    if (!std::isfinite(norm)) fault = fmt(kCmd, ": the gradient norm became ", norm);
                } else if (!grads_finite(model->parameters())) {
                    fault = fmt(kCmd, ": a gradient became non-finite");
                }
            }
            if (!fault.empty()) {
                nonfinite.on_nonfinite(
                    fault, fmt("at epoch ", epoch, " step ", step + 1, "/", spe, " (global step ",
                               global_step + 1, ", lr ", r.lr, ")"),
                    epoch > 1 ? fmt("the last checkpoint (", c.out, "/last, epoch ", epoch - 1, ") is intact")
                              : std::string("no checkpoint was written yet (epoch 1)"),
                    [&] {
                        opt->zero_grad();
                        cross_entropy((*model)(b.images), b.labels, smoothing).backward();
                    });
                if (sched) sched->step();   // skipped (on_nonfinite returned): the schedule moves on, as GradScaler's
                ++step, ++global_step, ++r.skipped;
                continue;
            }
            nonfinite.step_ok();
            opt->step();
            if (sched) sched->step();
            ++step, ++global_step;
            const TapeTotals t = current_tape().peak();
            if (t.stored_bytes > tape.stored_bytes) tape = t;
            const int64_t B = b.labels.size(0);
            loss_sum += static_cast<double>(loss_value) * B;
            correct += count_correct(logits, b.labels);
            seen += B;
            progress.update(step, loss_sum / seen, static_cast<double>(correct) / seen,
                            fmt("tape ", format_bytes(t.stored_bytes), " (dense ", format_bytes(t.dense_bytes), ", ",
                                EpochRecord::fixed(t.stored_bytes ? double(t.dense_bytes) / t.stored_bytes : 0.0, 1),
                                "x)"));
        }
        progress.finish();
        r.step = global_step;
        r.seconds = progress.seconds();
        r.img_per_s = seen / std::max(r.seconds, 1e-9);
        r.loss = seen ? loss_sum / seen : 0;
        r.train_acc = seen ? static_cast<double>(correct) / seen : 0;
        r.tape_bytes = tape.stored_bytes, r.tape_dense_bytes = tape.dense_bytes;
        if (tape.stored_bytes > tape_peak.stored_bytes) tape_peak = tape;

        r.evaluated = epoch == c.epochs || (c.eval_every > 0 && epoch % c.eval_every == 0) || epoch == c.stop_after;
        if (r.evaluated) {
            const EvalResult e = evaluate(*model, data.test, data.mean, data.std, c.eval_batch);
            r.test_acc = e.accuracy, r.test_loss = e.loss, r.eval_seconds = e.seconds;
        }
        const bool best = r.evaluated && r.test_acc > best_acc;
        if (best) best_acc = r.test_acc, best_epoch = epoch;
        r.rss_bytes = current_rss_bytes(), r.peak_rss_bytes = peak_rss_bytes();
        r.peak_tensor_bytes = memory_stats().peak_bytes;
        std::printf("%s\n", r.line().c_str());
        std::fflush(stdout);
        // last/ is written after everything else of the epoch (log line, best/): a run killed before it resumes from
        // the previous epoch and redoes this one identically (trim_log drops the line), where another order would
        // lose the epoch's log line or best/ for good.
        const json j = r.to_json();
        log << j.dump() << "\n" << std::flush;
        curves.add(j);
        curves.write(plot_path);
        if (best) save("best", epoch);
        save("last", epoch);
        last = r;
        if (c.stop_after > 0 && epoch == c.stop_after && epoch < c.epochs) {
            std::printf("stopped after epoch %lld (--stop-after); continue with: razor train --resume %s\n",
                        static_cast<long long>(epoch), c.out.c_str());
            break;
        }
    }

    std::printf("\nresult  test accuracy %s (best %.2f%% at epoch %lld)  |  %.0f img/s on %d threads  |  tape peak %s "
                "(dense %s)  |  tensor peak %s  |  peak RSS %s\n",
                last.evaluated ? (EpochRecord::fixed(100 * last.test_acc, 2) + "%").c_str() : "-",
                100 * std::max(best_acc, 0.0), static_cast<long long>(best_epoch), last.img_per_s, num_threads(),
                format_bytes(tape_peak.stored_bytes).c_str(), format_bytes(tape_peak.dense_bytes).c_str(),
                format_bytes(memory_stats().peak_bytes).c_str(), format_bytes(peak_rss_bytes()).c_str());
    std::printf("wrote   %s/last/, %s/best/ (%s, %s), %s, %s\n", c.out.c_str(), c.out.c_str(), kModelFile,
                kTrainStateFile, c.log.c_str(), plot_path.c_str());
    return 0;
}

}  // namespace razor::apps
