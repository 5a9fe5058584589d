// apps/sparse_train.cpp -- `razor sparse-train`: VR-PGE completely sparse training (Zhou et al., NeurIPS 2021) of a
// CIFAR ResNet or VGG, then the fixed subnetwork's fine-tune and its export as a physically smaller dense model.
//
// reference: the official VRPGE code (trainers/default.py, main loop and the "finetune" phase). spec:
// shared/docs/vr-pge.md §6-§8; docs: docs/vr-pge.md §8-§10.
//
// Phase A (--epochs): every step is one VR-PGE iteration (apps/vrpge_common.h, sparse/vrpge_step.h): two Bernoulli
//   subnetworks of s on the same minibatch, each run compact (models/channel_plan.h, true-sparse BN), the estimator
//   into s.grad, one joint clip (--clip 3) over w and s, Adam on s, SGD on w, the global projection onto
//   Σ s <= keep·n. lr_w and lr_s follow ½(1 + cos(π e / E)) per epoch. The progress line shows E[kept fraction]
//   = Σ s / n, the sampled subnets' MACs over dense, and img/s. The per-epoch test accuracy is LOGGING ONLY: one
//   Bernoulli sample of s, eval mode (running statistics), nothing updated (not the reference's train-mode eval).
// Phase B: s is frozen, no projection. --candidates (10) subnetworks are drawn from the final s; each is scored by
//   its accuracy on --select-batches training batches (train-mode BN, no gradient; the running statistics are
//   restored afterwards); the best is fine-tuned for --finetune-epochs (40) with SGD lr --finetune-lr (1e-3,
//   constant), momentum 0.9, weight decay --wd, clip --clip over w, compact on its fixed channels. Both the
//   last-epoch and the best-epoch test accuracy are reported (the reference reports the best, selected on the test
//   set: optimistic).
// Checkpoints and --resume: OUT/last/ (apps/checkpoint.h, atomic) is written after every epoch of both phases and
//   after the selection. It holds the dense model's weights and BN statistics (model.safetensors) and, in
//   train_state.safetensors, the phase, s, the RNG states (init, masks, default) and the run's flags; in phase A Adam's
//   state on s and SGD's on w, in phase B the chosen subnetwork (plan.counts, plan.kept), the fine-tune SGD's state and
//   the test accuracies so far. `--resume OUT` restores all of it and continues bit-exactly (same --threads): the
//   loader's order and augmentation are a function of (seed, epoch), the masks come from the restored mask stream.
//   Flags that change the computation must match the checkpoint's (apps/resume.h); --stop-after E stops after the
//   E-th epoch of the run (phase A epochs, then fine-tune epochs).
// Export: OUT/subnet/model.safetensors, the fine-tuned subnetwork as a physically smaller dense model
//   (ChannelPrunable::extract) with its widths in the metadata: `razor eval --checkpoint OUT/subnet` loads it, and
//   PyTorch loads the same state dict into the zoo architecture built with those widths.
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>

#include "apps/args.h"
#include "apps/checkpoint.h"
#include "apps/commands.h"
#include "apps/progress.h"
#include "apps/resume.h"
#include "apps/train_common.h"
#include "apps/train_state.h"
#include "apps/vrpge_common.h"
#include "core/core.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "models/registry.h"
#include "optim/clip_grad.h"

namespace razor::apps {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* kCmd = "razor sparse-train";

// Flags that change the computation must match the checkpoint's on --resume (or be left out); the last field marks the
// ones that may change (paths, threads, evaluation, stopping).
const std::vector<FlagSpec>& flag_specs() {
    static const std::vector<FlagSpec> specs = {
        {"model", "resnet32x2", "resnet20 | resnet32 | resnet56 | resnet32x2 | vgg16_bn | vgg19_bn"},
        {"dataset", "cifar10", "cifar10 | cifar100 | fashion-mnist | folder"},
        {"data", "", "dataset folder (cifar10: the folder holding data_batch_1.bin)", false, true},
        {"classes", "", "keep only these classes, relabelled 0..k-1"},
        {"keep", "0.5", "channel KEEP ratio rho: the budget is sum(s) <= rho * n (the reference's --prune-rate)"},
        {"epochs", "300", "phase A epochs"},
        {"batch", "128", "images per step"},
        {"lr", "0.1", "SGD lr on w (cosine per epoch)"},
        {"lr-s", "12e-3", "Adam lr on s (cosine per epoch)"},
        {"momentum", "0.9", "SGD momentum (phase A and B)"},
        {"wd", "5e-4", "SGD weight decay on every w, BN included (phase A and B)"},
        {"clip", "3", "joint gradient-norm clip over w and s (phase B: over w)"},
        {"s-init", "0.5", "initial keep probability of every channel"},
        {"score-norm", "sqrt", "sqrt (the reference) | exact (unbiased leave-one-out)"},
        {"estimator", "vr-pge", "vr-pge (the reference: leave-one-out baseline) | pge (vanilla, no baseline: an "
                                "ablation, high variance)"},
        {"projection", "bisection", "bisection (the reference) | exact (sort-based)"},
        {"variant", "two-backward", "two-backward (the reference) | one-backward (cheaper: one backward pass)"},
        {"align", "0", "round kept counts up to a multiple of this (8: SIMD; CHANGES the algorithm; 0 = off)"},
        {"candidates", "10", "phase B: subnetworks drawn from the final s"},
        {"select-batches", "20", "phase B: training batches that score each candidate"},
        {"finetune-epochs", "40", "phase B: fine-tune epochs of the chosen subnetwork (0 = none)"},
        {"finetune-lr", "1e-3", "phase B: constant SGD lr"},
        {"augment", "crop+flip", "crop+flip | none"},
        {"threads", "0", "OpenMP threads (0 = all cores); resume bit-exactly with the same count", false, true},
        {"workers", "1", "data loader threads", false, true},
        {"seed", "0", "seed for init, masks, shuffling and augmentation"},
        {"out", "runs/sparse", "run folder: last/, subnet/, log.jsonl", false, true},
        {"resume", "", "continue the run in this folder (its last/ checkpoint) where it stopped, in phase A or B",
         false, true},
        {"eval-every", "1", "phase A: test one sampled subnet every N epochs (logging only; 0 = never)", false, true},
        {"eval-batch", "500", "images per evaluation batch", false, true},
        {"steps-per-epoch", "0", "stop each epoch after N steps (0 = the whole set; for quick runs)"},
        {"stop-after", "0", "stop after this many epochs of the run (phase A epochs, then fine-tune epochs) with a "
                            "checkpoint, to continue later with --resume (0 = off)", false, true},
        {"overwrite", "", "start over in an --out that already holds a run", true, true},
    };
    return specs;
}

Args make_args() {
    return make_flag_args("sparse-train",
                          "VR-PGE sparse training (phase A), subnetwork selection and fine-tune (phase B), export; "
                          "checkpoints and --resume in either phase",
                          flag_specs());
}

template <class T>
void require(bool ok, const std::string& flag, const T& got, const std::string& expected) {
    if (!ok) throw Error(fmt(kCmd, ": --", flag, " must be ", expected, ", got ", got));
}

double cosine(double base, int64_t epoch, int64_t epochs) {
    return 0.5 * (1 + std::cos(M_PI * static_cast<double>(epoch) / static_cast<double>(epochs))) * base;
}

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

std::string join(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) {
        if (!s.empty()) s += ',';
        s += fmt(x);
    }
    return s;
}

// Accuracy of the model (compact under whatever ChannelSubsetScope is current) on `batches` batches of `loader`, train-mode BN, no gradient;
// the BN running statistics are put back afterwards (candidate scoring must not change the model).
double train_accuracy(nn::Module& model, data::DataLoader& loader, int64_t batches) {
    std::vector<std::pair<Tensor, Tensor>> saved;   // (buffer, its copy): running statistics, num_batches_tracked
    for (const auto& [k, t] : model.named_buffers()) saved.emplace_back(t, t.clone());
    NoGradGuard no_grad;
    int64_t correct = 0, seen = 0, b = 0;
    for (data::Batch& batch : loader) {
        if (b++ >= batches) break;
        correct += count_correct(model(batch.images), batch.labels);
        seen += batch.labels.size(0);
    }
    for (auto& [t, copy] : saved) {
        t.copy_(copy);
        t.bump_version();
    }
    return seen ? static_cast<double>(correct) / seen : 0;
}

// The chosen subnetwork in the train state: "plan.counts" (L) i64, the kept channels of each scored layer, and
// "plan.kept" (sum of counts) i64, their indices layer after layer.
void pack_plan(const models::ChannelPlan& plan, const std::vector<sparse::ScoredLayer>& layers,
               std::map<std::string, Tensor>& state) {
    std::vector<int64_t> counts, kept;
    for (const auto& layer : layers) {
        const auto& k = plan.at(layer.name);
        counts.push_back(static_cast<int64_t>(k.size()));
        kept.insert(kept.end(), k.begin(), k.end());
    }
    state["plan.counts"] = Tensor::from_vector_i64({static_cast<int64_t>(counts.size())}, counts);
    state["plan.kept"] = Tensor::from_vector_i64({static_cast<int64_t>(kept.size())}, kept);
}

models::ChannelPlan unpack_plan(const std::map<std::string, Tensor>& state, const std::string& where,
                                const std::vector<sparse::ScoredLayer>& layers) {
    const Tensor &counts = state_entry(state, "plan.counts", where), &kept = state_entry(state, "plan.kept", where);
    const auto hint = "; hint: resume from a folder razor sparse-train wrote, with the same --model";
    if (counts.dtype() != DType::I64 || kept.dtype() != DType::I64 || counts.dim() != 1 || kept.dim() != 1 ||
        counts.numel() != static_cast<int64_t>(layers.size()))
        throw Error(fmt(where, ": entries 'plan.counts' / 'plan.kept' must be i64 lists, the first of ", layers.size(),
                        " counts (one per scored layer), got ", dtype_name(counts.dtype()), " ",
                        shape_str(counts.shape()), " / ", dtype_name(kept.dtype()), " ", shape_str(kept.shape()), hint));
    const auto c = counts.to_vector_i64(), k = kept.to_vector_i64();
    models::ChannelPlan plan;
    size_t at = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
        if (c[l] < 0 || c[l] > layers[l].channels || at + static_cast<size_t>(c[l]) > k.size())
            throw Error(fmt(where, ": 'plan.counts' gives layer ", layers[l].name, " ", c[l], " kept channels; expected 0 to ",
                            layers[l].channels, " within the ", k.size(), " indices of 'plan.kept'", hint));
        const std::vector<int64_t> kl(k.begin() + static_cast<std::ptrdiff_t>(at),
                                      k.begin() + static_cast<std::ptrdiff_t>(at + c[l]));
        at += static_cast<size_t>(c[l]);
        for (size_t i = 0; i < kl.size(); ++i)
            if (kl[i] < 0 || kl[i] >= layers[l].channels || (i && kl[i] <= kl[i - 1]))
                throw Error(fmt(where, ": 'plan.kept' of layer ", layers[l].name, " must be ascending channel indices "
                                "in [0, ", layers[l].channels, "), got ", kl[i], " at position ", i, hint));
        plan.keep(layers[l].name, kl);
    }
    if (at != k.size())
        throw Error(fmt(where, ": 'plan.kept' holds ", k.size(), " indices, 'plan.counts' sums to ", at, hint));
    return plan;
}

// s from the "scores.<layer>.s" entries (same shapes as this model's), copied into the leaves Adam updates.
void restore_scores(const sparse::ChannelScores& scores, const std::map<std::string, Tensor>& state,
                    const std::string& where) {
    NoGradGuard no_grad;
    for (const auto& [name, s] : scores.named_parameters()) {
        const Tensor& v = state_entry(state, "scores." + name, where);
        if (v.dtype() != DType::F32 || v.shape() != s.shape())
            throw Error(fmt(where, ": entry 'scores.", name, "' must be f32 ", shape_str(s.shape()), ", got ",
                            dtype_name(v.dtype()), " ", shape_str(v.shape()),
                            "; hint: resume from a folder razor sparse-train wrote, with the same --model"));
        s.detach().copy_(v);
        s.bump_version();
    }
}

}  // namespace

int run_sparse_train(const std::vector<std::string>& argv) {
    Args args = make_args();
    args.parse(argv);
    if (args.help_requested()) {
        std::printf("%s", args.usage().c_str());
        return 0;
    }
    // --resume: the checkpoint's flags, apart from those that may change (apps/resume.h)
    Checkpoint resumed;
    const bool resuming = !args.str("resume").empty();
    if (resuming) {
        resumed = open_checkpoint(args.str("resume"));
        auto command = resumed.train_metadata.find("command");
        if (command == resumed.train_metadata.end() || command->second != "sparse-train")
            throw Error(fmt(kCmd, ": ", resumed.folder, " was not written by razor sparse-train (its train state has "
                            "no s, no phase); hint: continue a razor train run with razor train --resume"));
        const ResumedRun run = resumed_run(resumed);
        Args again = make_args();
        again.parse(reconcile_flags(kCmd, flag_specs(), args, run.config_json, args.str("resume"), run.root));
        args = again;
    }
    const std::string model_name = args.str("model"), out = args.str("out");
    const double keep = args.real("keep"), lr = args.real("lr"), lr_s = args.real("lr-s"), clip = args.real("clip");
    const int64_t epochs = args.integer("epochs"), batch = args.integer("batch"), seed = args.integer("seed");
    const int64_t candidates = args.integer("candidates"), select_batches = args.integer("select-batches");
    const int64_t ft_epochs = args.integer("finetune-epochs"), eval_every = args.integer("eval-every");
    const int64_t align = args.integer("align"), steps_per_epoch = args.integer("steps-per-epoch");
    const int64_t stop_after = args.integer("stop-after");
    require(keep > 0 && keep <= 1, "keep", keep, "in (0, 1]");
    require(epochs >= 0, "epochs", epochs, ">= 0");
    require(batch >= 1, "batch", batch, ">= 1");
    require(lr > 0 && lr_s > 0, "lr / --lr-s", fmt(lr, " / ", lr_s), "> 0");
    require(clip > 0, "clip", clip, "> 0");
    require(candidates >= 1, "candidates", candidates, ">= 1");
    require(select_batches >= 1, "select-batches", select_batches, ">= 1");
    require(ft_epochs >= 0, "finetune-epochs", ft_epochs, ">= 0");
    require(align >= 0, "align", align, ">= 0 (0 = off)");
    require(seed >= 0, "seed", seed, ">= 0");
    require(steps_per_epoch >= 0, "steps-per-epoch", steps_per_epoch, ">= 0");
    require(eval_every >= 0, "eval-every", eval_every, ">= 0");
    require(stop_after >= 0, "stop-after", stop_after, ">= 0 (0 = off)");
    const double s_init = args.real("s-init");
    require(s_init >= 0 && s_init <= 1, "s-init", s_init, "in [0, 1]");
    const std::string score_norm = args.str("score-norm"), projection = args.str("projection"),
                      variant = args.str("variant"), augment = args.str("augment"), estimator = args.str("estimator");
    require(score_norm == "sqrt" || score_norm == "exact", "score-norm", score_norm, "sqrt | exact");
    require(estimator == "vr-pge" || estimator == "pge", "estimator", estimator, "vr-pge | pge");
    require(projection == "bisection" || projection == "exact", "projection", projection, "bisection | exact");
    require(variant == "two-backward" || variant == "one-backward", "variant", variant, "two-backward | one-backward");
    require(augment == "crop+flip" || augment == "none", "augment", augment, "crop+flip | none");
    if (!resuming && !args.on("overwrite") &&
        (fs::exists(fs::path(out) / "last") || fs::exists(fs::path(out) / "last.old") ||
         fs::exists(fs::path(out) / "subnet")))
        throw Error(fmt(kCmd, ": ", out, " already holds a run; hint: continue it with --resume ", out,
                        ", pick another --out, or pass --overwrite to start over"));
    set_num_threads(static_cast<int>(args.integer("threads")));
    std::printf("%s\n", runtime_banner().c_str());

    // ---- data ----
    const DataSplits data = load_splits(kCmd, args.str("dataset"), args.str("data"), args.str("classes"));
    const Shape image = data.train.image_shape();
    std::vector<data::TransformPtr> tf;
    if (augment == "crop+flip") tf = {data::random_crop(image[1], 4), data::random_horizontal_flip()};
    tf.push_back(data::to_float_transform());
    tf.push_back(data::normalize_transform(data.mean, data.std));
    const int64_t workers = args.integer("workers");
    data::DataLoader loader(data.train, data::compose(tf),
                            {.batch_size = batch, .shuffle = true, .drop_last = false,
                             .seed = static_cast<uint64_t>(seed), .workers = workers});
    const int64_t spe = steps_per_epoch > 0 ? std::min(steps_per_epoch, loader.size()) : loader.size();
    std::printf("data   %s: %lld train, %lld test images %s, %lld classes\n", args.str("dataset").c_str(),
                static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
                shape_str(image).c_str(), static_cast<long long>(data.train.num_classes));

    // ---- model, scores, optimisers ----
    Generator gen(static_cast<uint64_t>(seed));
    manual_seed(static_cast<uint64_t>(seed));
    auto model = models::make_model(model_name, data.train.num_classes, gen,
                                    {.in_channels = image[0], .image_size = image[1]});
    VrpgeTrainerOptions o;
    o.s_init = static_cast<float>(s_init);
    o.adam.lr = lr_s;
    o.sgd = {.lr = lr, .momentum = args.real("momentum"), .weight_decay = args.real("wd")};
    o.step = {.rho = keep,
              .max_norm = clip,
              .score_norm = score_norm == "sqrt" ? sparse::ScoreNorm::Sqrt : sparse::ScoreNorm::Exact,
              .estimator = estimator == "vr-pge" ? sparse::Estimator::VrPge : sparse::Estimator::Pge,
              .projection = projection == "bisection" ? sparse::ProjectionMethod::Bisection : sparse::ProjectionMethod::Exact,
              .variant = variant == "two-backward" ? sparse::VrpgeVariant::TwoBackward : sparse::VrpgeVariant::OneBackward,
              .align = align};
    VrpgeTrainer trainer(model, o);
    Generator mask_gen(static_cast<uint64_t>(seed) + 0x5eed);   // masks: their own stream
    const int64_t n = trainer.scores.num_masked_channels();
    std::printf("model  %s: %lld parameters, %lld scored convs, n = %lld prunable channels (classifier excluded)\n",
                model_name.c_str(), static_cast<long long>(model->num_parameters()),
                static_cast<long long>(trainer.scores.parameters().size()), static_cast<long long>(n));
    std::printf("vrpge  keep %g (budget %.1f channels) | s init %g | %s | %s | score %s | projection %s | clip %g | "
                "BN true-sparse%s\n",
                keep, trainer.scores.budget(keep), s_init, variant_name(o.step.variant).c_str(),
                estimator == "pge" ? "estimator: vanilla PGE, no baseline (an ablation, NOT the reference)"
                                   : "estimator: VR-PGE",
                score_norm.c_str(), projection.c_str(), clip, align ? fmt(" | --align ", align, ": kept counts rounded up, CHANGES the "
                                                      "algorithm (biased estimator)").c_str() : "");
    std::printf("train  phase A %lld epochs x %lld steps of %lld, SGD lr %g Adam lr_s %g (cosine per epoch) | phase B "
                "%lld candidates, %lld fine-tune epochs at lr %g | seed %lld\n",
                static_cast<long long>(epochs), static_cast<long long>(spe), static_cast<long long>(batch), lr, lr_s,
                static_cast<long long>(candidates), static_cast<long long>(ft_epochs), args.real("finetune-lr"),
                static_cast<long long>(seed));

    // ---- resume: where the run stood (phase A after a_done epochs, or phase B after b_done fine-tune epochs) ----
    // The fine-tune optimizer exists from the start so that a run resumed in phase B can load its state.
    optim::SGD ft(model->named_parameters(),
                  {.lr = args.real("finetune-lr"), .momentum = args.real("momentum"), .weight_decay = args.real("wd")});
    int64_t a_done = 0, b_done = 0, best_epoch = 0;
    bool in_b = false;                      // the subnetwork is chosen (phase B)
    models::ChannelPlan best_plan;
    double best_acc = -1, last_acc = -1;    // phase B test accuracy: best over the fine-tune epochs, and the last
    if (resuming) {
        const std::string where = resumed.folder + "/" + kTrainStateFile;
        const auto& state = resumed.train_state;
        try {
            model->load_state_dict(resumed.model);
        } catch (const Error& e) {
            throw Error(fmt(kCmd, ": ", resumed.folder, "/", kModelFile, " does not fit --model ", model_name, ": ",
                            e.what()));
        }
        in_b = state_i64(state, "phase", where, 0, 1) == 1;
        a_done = state_i64(state, "epoch", where, in_b ? epochs : 0, epochs);
        restore_scores(trainer.scores, state, where);
        try {
            if (in_b) {
                b_done = state_i64(state, "finetune_epoch", where, 0, ft_epochs);
                best_epoch = state_i64(state, "best_epoch", where, 0, b_done);
                best_acc = optim::unpack_f64(state_entry(state, "best_test_acc", where), where + ": best_test_acc");
                last_acc = optim::unpack_f64(state_entry(state, "last_test_acc", where), where + ": last_test_acc");
                best_plan = unpack_plan(state, where, trainer.scores.layers());
                ft.load_state_dict(state_with_prefix(state, "optimizer_ft."));
            } else {
                trainer.opt_s.load_state_dict(state_with_prefix(state, "optimizer_s."));
                trainer.opt_w.load_state_dict(state_with_prefix(state, "optimizer_w."));
            }
        } catch (const Error& e) {
            throw Error(fmt(where, ": ", e.what()));
        }
        default_generator().set_state(state_generator(state, "rng.default", where));
        gen.set_state(state_generator(state, "rng.init", where));
        mask_gen.set_state(state_generator(state, "rng.masks", where));
        std::printf("resume %s: %s\n", resumed.folder.c_str(),
                    in_b ? fmt("phase B, subnetwork chosen, after fine-tune epoch ", b_done, "/", ft_epochs).c_str()
                         : fmt("phase A, after epoch ", a_done, "/", epochs).c_str());
    }

    // ---- outputs ----
    fs::create_directories(out);
    const std::string log_path = (fs::path(out) / "log.jsonl").string();
    // A resumed run keeps the log lines its checkpoint holds; lines logged after it (the epoch a kill interrupted, a
    // selection that was not checkpointed) are dropped and written again, identically.
    std::function<bool(const json&)> keep_line;
    if (resuming)
        keep_line = [&](const json& j) {
            const std::string phase = j.value("phase", "");
            const int64_t e = j.contains("epoch") && j["epoch"].is_number() ? j["epoch"].get<int64_t>() : 0;
            if (phase == "A") return e <= a_done;
            if (phase == "B-select") return in_b;
            if (phase == "B") return in_b && e <= b_done;
            return false;   // "export": written again at the end
        };
    trim_log(log_path, keep_line);
    std::ofstream log(log_path, std::ios::app);
    if (!log) throw Error(fmt(kCmd, ": cannot open ", log_path, " for writing; hint: check --out"));
    std::map<std::string, std::string> meta = {
        {"format", "pt"},
        {"model", model_name},
        {"dataset", args.str("dataset")},
        {"num_classes", fmt(data.train.num_classes)},
        {"in_channels", fmt(image[0])},
        {"image_size", fmt(image[1])},
        {"normalize_mean", join_floats(data.mean)},
        {"normalize_std", join_floats(data.std)}};
    const json config = run_config(flag_specs(), args);
    // OUT/last after every epoch of either phase and after the selection (apps/checkpoint.h: atomic for the pair).
    // Phase A: s, Adam on s, SGD on w. Phase B: s (frozen), the chosen subnetwork, the fine-tune SGD, the test
    // accuracies so far. Both: the RNG states (init, masks, default); the model's weights and BN statistics.
    auto save = [&]() {
        Checkpoint ck;
        const int64_t position = in_b ? epochs + b_done : a_done;   // epochs of the run done
        ck.model = model->state_dict();
        ck.model_metadata = meta;
        ck.model_metadata["epoch"] = fmt(position);
        for (const auto& [k, s] : trainer.scores.named_parameters()) ck.train_state["scores." + k] = s.detach();
        if (in_b) {
            for (const auto& [k, v] : ft.state_dict()) ck.train_state["optimizer_ft." + k] = v;
            pack_plan(best_plan, trainer.scores.layers(), ck.train_state);
            ck.train_state["finetune_epoch"] = i64_scalar(b_done);
            ck.train_state["best_epoch"] = i64_scalar(best_epoch);
            ck.train_state["best_test_acc"] = optim::pack_f64(best_acc);
            ck.train_state["last_test_acc"] = optim::pack_f64(last_acc);
        } else {
            for (const auto& [k, v] : trainer.opt_s.state_dict()) ck.train_state["optimizer_s." + k] = v;
            for (const auto& [k, v] : trainer.opt_w.state_dict()) ck.train_state["optimizer_w." + k] = v;
        }
        ck.train_state["phase"] = i64_scalar(in_b ? 1 : 0);
        ck.train_state["epoch"] = i64_scalar(a_done);
        ck.train_state["rng.default"] = pack_generator_state(default_generator().state());
        ck.train_state["rng.init"] = pack_generator_state(gen.state());
        ck.train_state["rng.masks"] = pack_generator_state(mask_gen.state());
        ck.train_metadata = {{"command", "sparse-train"}, {"config", config.dump()}, {"epoch", fmt(position)},
                             {"phase", in_b ? "B" : "A"}};
        save_checkpoint(out, "last", ck);
    };
    // --stop-after E: after the E-th epoch of the run (phase A epochs, then fine-tune epochs), with its checkpoint.
    auto stop_here = [&](int64_t position) {
        if (stop_after == 0 || position != stop_after || position >= epochs + ft_epochs) return false;
        std::printf("stopped after epoch %lld of %lld (--stop-after); continue with: razor sparse-train --resume %s\n",
                    static_cast<long long>(position), static_cast<long long>(epochs + ft_epochs), out.c_str());
        return true;
    };

    // ---- phase A: joint sparse training ----
    for (int64_t epoch = a_done + 1; epoch <= epochs; ++epoch) {
        loader.set_epoch(epoch - 1);
        trainer.opt_w.set_lr(cosine(lr, epoch - 1, epochs));
        trainer.opt_s.set_lr(cosine(lr_s, epoch - 1, epochs));
        Progress progress(fmt("A ", epoch, "/", epochs), spe, batch);
        double loss_sum = 0, cost_sum = 0, norm_sum = 0, s_norm_sum = 0;
        int64_t correct = 0, seen = 0, step = 0, clipped = 0;
        for (data::Batch& b : loader) {
            if (step >= spe) break;
            const VrpgeTrainer::Step r = trainer.step(b.images, b.labels, mask_gen);
            if (!std::isfinite(r.result.loss1) || !std::isfinite(r.result.loss2) || !std::isfinite(r.result.grad_norm))
                throw Error(fmt(kCmd, ": the loss or gradient norm became non-finite at epoch ", epoch, " step ",
                                step + 1, " (losses ", r.result.loss1, ", ", r.result.loss2, ", norm ",
                                r.result.grad_norm, "); the last checkpoint (", out, "/last) is intact; hint: lower --lr"));
            ++step;
            const int64_t B = b.labels.size(0);
            loss_sum += 0.5 * (r.result.loss1 + r.result.loss2) * B;
            correct += count_correct(r.logits, b.labels);
            seen += B;
            cost_sum += r.cost_ratio;
            norm_sum += r.result.grad_norm;
            s_norm_sum += r.result.s_grad_norm;
            clipped += r.result.grad_norm > clip;
            progress.update(step, loss_sum / seen, static_cast<double>(correct) / seen,
                            fmt("E[keep] ", fixed(trainer.expected_keep(), 3), "  flops ", fixed(r.cost_ratio, 3),
                                "x dense"));
        }
        progress.finish();
        json j = {{"phase", "A"},
                  {"epoch", epoch},
                  {"epochs", epochs},
                  {"loss", seen ? loss_sum / seen : 0},
                  {"train_acc", seen ? static_cast<double>(correct) / seen : 0},
                  {"expected_keep", trainer.expected_keep()},
                  {"flops_ratio", step ? cost_sum / step : 0},
                  {"grad_norm", step ? norm_sum / step : 0},       // mean joint norm (w and s) before the clip
                  {"s_grad_norm", step ? s_norm_sum / step : 0},   // mean norm of s.grad alone, before the clip
                  {"clipped", step ? static_cast<double>(clipped) / step : 0},   // fraction of steps clipped
                  {"lr", trainer.opt_w.lr()},
                  {"lr_s", trainer.opt_s.lr()},
                  {"seconds", progress.seconds()},
                  {"img_per_s", progress.images_per_second()},
                  {"test_acc_sampled", nullptr}};
        if (eval_every > 0 && (epoch % eval_every == 0 || epoch == epochs)) {
            // logging only: one Bernoulli subnet of s, eval mode, nothing updated
            Generator eval_gen(static_cast<uint64_t>(seed) * 7919 + static_cast<uint64_t>(epoch));
            const auto plan = models::ChannelPlan::from_masks(trainer.scores.layers(), trainer.scores.sample(eval_gen));
            nn::ChannelSubsetScope compact(plan);
            j["test_acc_sampled"] = evaluate(*model, data.test, data.mean, data.std, args.integer("eval-batch")).accuracy;
        }
        std::printf("A %lld/%lld  loss %.4f  train %.1f%%  test(1 sample, logging only) %s  E[keep] %.3f  flops %.3fx  "
                    "lr %.3g  lr_s %.3g  norm %.2f (s %.2f, clipped %.0f%%)  %.0f s  %.0f img/s\n",
                    static_cast<long long>(epoch), static_cast<long long>(epochs), j["loss"].get<double>(),
                    100 * j["train_acc"].get<double>(),
                    j["test_acc_sampled"].is_null() ? "-" : (fixed(100 * j["test_acc_sampled"].get<double>(), 1) + "%").c_str(),
                    trainer.expected_keep(), j["flops_ratio"].get<double>(), trainer.opt_w.lr(), trainer.opt_s.lr(),
                    j["grad_norm"].get<double>(), j["s_grad_norm"].get<double>(), 100 * j["clipped"].get<double>(),
                    progress.seconds(), progress.images_per_second());
        std::fflush(stdout);
        // the log line before last/: a run killed between the two redoes this epoch and rewrites the line (trim_log)
        log << j.dump() << "\n" << std::flush;
        a_done = epoch;
        save();
        if (stop_here(epoch)) return 0;
    }

    // ---- phase B: pick the best of --candidates subnetworks by training accuracy ----
    model->train();
    if (!in_b) {
        data::DataLoader select_loader(
            data.train, data::compose({data::to_float_transform(), data::normalize_transform(data.mean, data.std)}),
            {.batch_size = batch, .shuffle = true, .drop_last = false, .seed = static_cast<uint64_t>(seed) + 1,
             .workers = args.integer("workers")});
        double best_select = -1;
        for (int64_t c = 0; c < candidates; ++c) {
            const auto plan = models::ChannelPlan::from_masks(trainer.scores.layers(), trainer.scores.sample(mask_gen));
            nn::ChannelSubsetScope compact(plan);   // this candidate
            {
                NoGradGuard no_grad;   // MACs of this candidate: one eval-mode forward (updates nothing)
                model->eval();
                (*model)(Tensor::zeros({1, image[0], image[1], image[2]}));
                model->train();
            }
            const double cost = compact.cost().ratio();   // that forward's
            const double acc = train_accuracy(*model, select_loader, select_batches);
            int64_t kept = 0;
            for (const auto& layer : trainer.scores.layers())
                if (layer.masked) kept += static_cast<int64_t>(plan.at(layer.name).size());
            std::printf("B candidate %lld/%lld: %lld/%lld channels kept, MACs %.3fx dense, train accuracy %.2f%% (%lld "
                        "batches)\n",
                        static_cast<long long>(c + 1), static_cast<long long>(candidates), static_cast<long long>(kept),
                        static_cast<long long>(n), cost, 100 * acc, static_cast<long long>(select_batches));
            log << json{{"phase", "B-select"}, {"candidate", c + 1}, {"kept", kept}, {"flops_ratio", cost},
                        {"train_acc", acc}}.dump()
                << "\n" << std::flush;
            if (acc > best_select) best_select = acc, best_plan = plan;
        }
        in_b = true;
        save();   // the choice is kept: a run resumed from here fine-tunes the same subnetwork
    }
    std::optional<nn::ChannelSubsetScope> compact(std::in_place, best_plan);   // phase B runs the chosen subnetwork compact

    // ---- phase B: fine-tune the fixed subnetwork's weights ----
    for (int64_t epoch = b_done + 1; epoch <= ft_epochs; ++epoch) {
        loader.set_epoch(epochs + epoch - 1);
        Progress progress(fmt("B ", epoch, "/", ft_epochs), spe, batch);
        double loss_sum = 0;
        int64_t correct = 0, seen = 0, step = 0;
        for (data::Batch& b : loader) {
            if (step >= spe) break;
            ft.zero_grad();
            const Tensor logits = (*model)(b.images);
            const Tensor loss = cross_entropy(logits, b.labels);
            const double value = loss.item();
            if (!std::isfinite(value))
                throw Error(fmt(kCmd, ": the fine-tune loss became ", value, " at epoch ", epoch, "; hint: lower "
                                "--finetune-lr"));
            loss.backward();
            optim::clip_grad_norm_(ft.params(), clip);
            ft.step();
            ++step;
            const int64_t B = b.labels.size(0);
            loss_sum += value * B, correct += count_correct(logits, b.labels), seen += B;
            progress.update(step, loss_sum / seen, static_cast<double>(correct) / seen,
                            fmt("flops ", fixed(compact->cost().ratio(), 3), "x dense"));
        }
        progress.finish();
        const EvalResult e = evaluate(*model, data.test, data.mean, data.std, args.integer("eval-batch"));
        last_acc = e.accuracy;
        if (e.accuracy > best_acc) best_acc = e.accuracy, best_epoch = epoch;
        std::printf("B %lld/%lld  loss %.4f  train %.1f%%  test %.2f%%  %.0f s  %.0f img/s\n",
                    static_cast<long long>(epoch), static_cast<long long>(ft_epochs), seen ? loss_sum / seen : 0,
                    seen ? 100.0 * correct / seen : 0, 100 * e.accuracy, progress.seconds(),
                    progress.images_per_second());
        std::fflush(stdout);
        log << json{{"phase", "B"}, {"epoch", epoch}, {"loss", seen ? loss_sum / seen : 0},
                    {"train_acc", seen ? static_cast<double>(correct) / seen : 0}, {"test_acc", e.accuracy},
                    {"seconds", progress.seconds()}, {"img_per_s", progress.images_per_second()}}.dump()
            << "\n" << std::flush;
        b_done = epoch;
        save();
        if (stop_here(epochs + epoch)) return 0;
    }
    if (ft_epochs == 0) last_acc = best_acc = evaluate(*model, data.test, data.mean, data.std, args.integer("eval-batch")).accuracy;

    // ---- export: the physically smaller dense model ----
    model->eval();
    compact.reset();   // dense from here: the export shares the module paths of the plan
    const auto sub = trainer.prunable.extract(best_plan);
    auto sub_meta = meta;
    sub_meta["widths"] = join(sub.widths);
    sub_meta["keep"] = fmt(keep);
    sub_meta["bn_semantics"] = "true-sparse";
    sub_meta["epoch"] = fmt(epochs + ft_epochs);
    fs::create_directories(fs::path(out) / "subnet");
    const std::string sub_path = (fs::path(out) / "subnet" / kModelFile).string();
    save_safetensors(sub_path, sub.model->state_dict(), sub_meta);
    {
        // an input and the export's eval-mode logits, for scripts/check_interop.py (the PyTorch side)
        NoGradGuard no_grad;
        Generator io_gen(static_cast<uint64_t>(seed) + 21);
        const Tensor x = Tensor::randn({4, image[0], image[1], image[2]}, io_gen);
        save_safetensors((fs::path(out) / "subnet" / "model.logits.safetensors").string(),
                         {{"input", x}, {"logits", (*sub.model)(x)}});
    }
    const EvalResult check = evaluate(*sub.model, data.test, data.mean, data.std, args.integer("eval-batch"));
    log << json{{"phase", "export"}, {"params", sub.model->num_parameters()}, {"dense_params", model->num_parameters()},
                {"widths", sub.widths}, {"test_acc", check.accuracy}, {"last_test_acc", last_acc},
                {"best_test_acc", best_acc}, {"best_epoch", best_epoch}}.dump()
        << "\n" << std::flush;
    std::printf("\nresult  subnetwork test accuracy %.2f%% after the last fine-tune epoch (best %.2f%% at epoch %lld, "
                "selected on the test set: optimistic)  |  %lld of %lld parameters (%.1f%%)  |  BN true-sparse%s\n",
                100 * last_acc, 100 * best_acc, static_cast<long long>(best_epoch),
                static_cast<long long>(sub.model->num_parameters()), static_cast<long long>(model->num_parameters()),
                100.0 * sub.model->num_parameters() / model->num_parameters(),
                align ? fmt(", --align ", align, " (changes the algorithm)").c_str() : "");
    std::printf("wrote   %s (widths %s; razor eval --checkpoint %s/subnet loads it: %.2f%%), %s/last/, %s\n",
                sub_path.c_str(), join(sub.widths).c_str(), out.c_str(), 100 * check.accuracy, out.c_str(),
                log_path.c_str());
    return 0;
}

}  // namespace razor::apps
