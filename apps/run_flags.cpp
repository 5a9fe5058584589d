// apps/run_flags.cpp -- see run_flags.h.
#include "apps/run_flags.h"

#include <cstdlib>

#include "models/registry.h"
#include "train/data_splits.h"

namespace razor::apps {

const FlagTable<DataFlags>& data_flag_family() {
    using F = DataFlags;
    static const FlagTable<F> table =
        FlagTable<F>()
            .text("dataset", "cifar10", "cifar10 | cifar100 | fashion-mnist | folder (ROOT/train/CLASS/ of JPEG or "
                  "PNG images, with ROOT/val/ and/or ROOT/test/; any image sizes)", &F::dataset)
            .text("data", "", "dataset folder (cifar10: the folder holding data_batch_1.bin; default: datasets/DATASET, "
                  "where razor data fetch puts it; fashion-mnist: else Debian's dataset-fashion-mnist)", &F::data, true)
            .text("classes", "", "keep only these classes, relabelled 0..k-1: indices (2,3,4) or names (cat,dog)",
                  &F::classes)
            .text("augment", "auto", "auto (folder: rrc+flip, else crop+flip) | crop+flip (pad 4, random crop, "
                  "horizontal flip) | rrc+flip (RandomResizedCrop + flip) | none", &F::augment)
            .integer("workers", "1", "data loader threads decoding and augmenting batches ahead", &F::workers, true)
            .integer("image-size", "0", "train and eval resolution (0: the images' own when they share one square "
                     "size, else 224; a fine-tune: its --from's)", &F::image_size)
            .real("val-split", "0", "folder without val/: carve this fraction of each class of train/ as the "
                  "validation split (best/ is chosen on it)", &F::val_split)
            .integer("val-seed", "0", "seed of the --val-split draw", &F::val_seed)
            .real("crop-pct", "", "eval: resize the shorter side to image-size / crop-pct, then centre crop "
                  "(default 0.875 for a folder, 1 otherwise)", &F::crop_pct)
            .text("interpolation", "", "bilinear | bicubic, antialiased (default: a fine-tune's --from's, else "
                  "bilinear)", &F::interpolation)
            .text("mean", "", "Normalize mean per channel, e.g. 0.485,0.456,0.406 (default: a fine-tune's --from's, "
                  "else the dataset's; measured for a folder)", &F::mean)
            .text("std", "", "Normalize std per channel (defaults as --mean)", &F::std);
    return table;
}

const FlagTable<ModelInputFlags>& model_input_flag_family() {
    using F = ModelInputFlags;
    static const std::string model_help = models::model_names_joined();
    static const FlagTable<F> table =
        FlagTable<F>()
            .text("model", "resnet20", model_help.c_str(), &F::model)
            .integer("classes", "10", "number of classes (the head's outputs)", &F::classes)
            .integer("channels", "3", "input channels", &F::channels)
            .integer("image-size", "32", "input height = width (28 for MNIST-style mlp / lenet5)", &F::image_size);
    return table;
}

const FlagTable<RunFlags>& run_flag_family() {
    using F = RunFlags;
    static const FlagTable<F> table =
        FlagTable<F>()
            .integer("threads", "0", "OpenMP threads (0 = OMP_NUM_THREADS if set, else all cores); resume bit-exactly with the same count",
                     &F::threads, true)
            .integer("seed", "0", "seed for init, shuffling and augmentation", &F::seed)
            .text("out", "runs/train", "run folder: last/ checkpoint, log.jsonl", &F::out, true)
            .text("resume", "", "continue the run in this folder (its last/ checkpoint) where it stopped", &F::resume,
                  true)
            .integer("eval-every", "1", "evaluate on the test set every N epochs and after the last (0 = never)",
                     &F::eval_every, true)
            .integer("eval-batch", "0", "images per evaluation batch (0 = --batch: evaluation, which keeps no tape, "
                     "then needs less memory than a training step)", &F::eval_batch, true)
            .integer("eval-steps", "0", "evaluate on at most N batches of --eval-batch (0 = the whole test set; for "
                     "quick runs)", &F::eval_steps, true)
            .integer("steps-per-epoch", "0", "stop each epoch after N steps (0 = the whole training set; for quick "
                     "runs)", &F::steps_per_epoch)
            .boolean("overwrite", "start a new run in an --out that already holds a checkpoint (its files are "
                     "replaced as the new run writes them)", &F::overwrite, true)
            .integer("stop-after", "0", "stop after this epoch with a checkpoint, to continue later with --resume (0 = "
                     "off)", &F::stop_after, true)
            .integer("save-every", "0", "also checkpoint OUT/last every N steps inside an epoch, for --resume (0 = at "
                     "epoch ends only; Ctrl-C always checkpoints after the step in flight)", &F::save_every, true)
            .boolean("skip-nonfinite", "on a NaN/Inf loss or gradient: report the op, skip the optimizer step and go "
                     "on (gives up after 20 such steps in a row); default: stop", &F::skip_nonfinite, true);
    return table;
}

void require_one_of(const std::string& command, const std::string& flag, const std::string& got,
                    const std::vector<std::string>& valid) {
    std::string list;
    bool ok = false;
    for (const auto& v : valid) list += (list.empty() ? "" : " | ") + v, ok = ok || v == got;
    if (!ok) throw Error(fmt(command, ": --", flag, " must be one of ", list, "; got '", got, "'"));
}

void check_data_flags(const std::string& command, const DataFlags& f) {
    require_one_of(command, "dataset", f.dataset, train::kDatasetNames);
    require_one_of(command, "augment", f.augment, {"auto", "crop+flip", "rrc+flip", "none"});
    require(command, f.workers >= 0, "workers", f.workers, ">= 0");
    require(command, f.workers <= kMaxThreads, "workers", f.workers, fmt("<= ", kMaxThreads));
    require(command, f.image_size >= 0, "image-size", f.image_size, ">= 0 (0 = the images' own size)");
    require(command, f.image_size <= kMaxImageSize, "image-size", f.image_size, fmt("<= ", kMaxImageSize));
    require(command, f.val_split >= 0 && f.val_split < 1, "val-split", f.val_split, "in [0, 1)");
    require(command, f.val_seed >= 0, "val-seed", f.val_seed, ">= 0");
    if (f.crop_pct) require(command, *f.crop_pct > 0 && *f.crop_pct <= 1, "crop-pct", *f.crop_pct, "in (0, 1]");
    if (!f.interpolation.empty()) require_one_of(command, "interpolation", f.interpolation, {"bilinear", "bicubic"});
    if (f.mean.empty() != f.std.empty())
        throw Error(fmt(command, ": --mean and --std go together, got only --", f.mean.empty() ? "std" : "mean",
                        "; hint: give both, one value per channel"));
}

data::Augment augment_of(const DataFlags& f) {
    if (f.augment == "auto") return f.dataset == "folder" ? data::Augment::ResizedCropFlip : data::Augment::CropFlip;
    return data::parse_augment(f.augment, "--augment");
}

train::SplitOptions split_options(const std::string& command, const DataFlags& f,
                                  const std::map<std::string, std::string>* defaults) {
    const auto stored = [&](const char* key) {
        if (!defaults) return std::string();
        auto it = defaults->find(key);
        return it == defaults->end() ? std::string() : it->second;
    };
    const auto floats = [&](const std::string& flag, const std::string& text) {
        std::vector<float> v;
        for (double x : train::parse_number_list(command, flag, text)) v.push_back(static_cast<float>(x));
        return v;
    };
    train::SplitOptions o;
    o.classes = f.classes;
    o.val_split = f.val_split;
    o.val_seed = static_cast<uint64_t>(f.val_seed);
    o.crop_pct = f.crop_pct;
    o.image_size = f.image_size;
    if (o.image_size == 0 && !stored("image_size").empty()) {
        const std::string text = stored("image_size");
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (*end != '\0' || v < 1 || v > kMaxImageSize)
            throw Error(fmt(command, ": the checkpoint's metadata image_size is '", text, "'; expected a size in [1, ",
                            kMaxImageSize, "]; hint: pass --image-size"));
        o.image_size = v;
    }
    const std::string interp = !f.interpolation.empty() ? f.interpolation : stored("interpolation");
    o.interpolation = interp.empty() ? data::Interpolation::Bilinear : data::parse_interpolation(interp, command + ": --interpolation");
    if (!f.mean.empty()) o.mean = floats("mean", f.mean), o.std = floats("std", f.std);
    else if (!stored("normalize_mean").empty() && !stored("normalize_std").empty())
        o.mean = floats("mean", stored("normalize_mean")), o.std = floats("std", stored("normalize_std"));
    if (o.mean.size() != o.std.size())
        throw Error(fmt(command, ": ", o.mean.size(), " --mean values but ", o.std.size(), " --std values; expected "
                        "one of each per channel"));
    for (float s : o.std)
        if (!(s > 0.f)) throw Error(fmt(command, ": --std values must be > 0, got ", s));
    return o;
}

void check_run_flags(const std::string& command, const RunFlags& f) {
    // Upper bounds keep products such as epochs x steps and casts to int (threads) far from overflow.
    require(command, f.threads >= 0, "threads", f.threads, ">= 0 (0 = all cores)");
    require(command, f.threads <= kMaxThreads, "threads", f.threads, fmt("<= ", kMaxThreads));
    require(command, f.seed >= 0, "seed", f.seed, ">= 0");
    require(command, f.eval_every >= 0, "eval-every", f.eval_every, ">= 0");
    require(command, f.eval_batch >= 0, "eval-batch", f.eval_batch, ">= 0 (0 = --batch)");
    require(command, f.eval_steps >= 0, "eval-steps", f.eval_steps, ">= 0 (0 = the whole test set)");
    require(command, f.steps_per_epoch >= 0, "steps-per-epoch", f.steps_per_epoch, ">= 0 (0 = the whole set)");
    require(command, f.stop_after >= 0, "stop-after", f.stop_after, ">= 0 (0 = off)");
    require(command, f.steps_per_epoch <= kMaxCount, "steps-per-epoch", f.steps_per_epoch, fmt("<= ", kMaxCount));
    require(command, f.eval_batch <= kMaxCount, "eval-batch", f.eval_batch, fmt("<= ", kMaxCount));
    require(command, f.save_every >= 0, "save-every", f.save_every, ">= 0 (0 = at epoch ends only)");
}

}  // namespace razor::apps
