// apps/run_flags.cpp -- see run_flags.h.
#include "apps/run_flags.h"

#include "models/registry.h"
#include "train/data_splits.h"

namespace razor::apps {

const FlagTable<DataFlags>& data_flag_family() {
    using F = DataFlags;
    static const FlagTable<F> table =
        FlagTable<F>()
            .text("dataset", "cifar10", "cifar10 | cifar100 | fashion-mnist | folder (ROOT/{train,test}/CLASS/*.png)",
                  &F::dataset)
            .text("data", "", "dataset folder (cifar10: the folder holding data_batch_1.bin)", &F::data, true)
            .text("classes", "", "keep only these classes, relabelled 0..k-1: indices (2,3,4) or names (cat,dog)",
                  &F::classes)
            .text("augment", "crop+flip", "crop+flip (pad 4, random crop, horizontal flip) | none", &F::augment)
            .integer("workers", "1", "data loader threads building batches ahead", &F::workers, true);
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
            .integer("threads", "0", "OpenMP threads (0 = all cores); resume bit-exactly with the same count",
                     &F::threads, true)
            .integer("seed", "0", "seed for init, shuffling and augmentation", &F::seed)
            .text("out", "runs/train", "run folder: last/ checkpoint, log.jsonl", &F::out, true)
            .text("resume", "", "continue the run in this folder (its last/ checkpoint) where it stopped", &F::resume,
                  true)
            .integer("eval-every", "1", "evaluate on the test set every N epochs (and after the last; 0 = only after "
                     "the last)", &F::eval_every, true)
            .integer("eval-batch", "500", "images per evaluation batch", &F::eval_batch, true)
            .integer("steps-per-epoch", "0", "stop each epoch after N steps (0 = the whole training set; for quick "
                     "runs)", &F::steps_per_epoch)
            .boolean("overwrite", "start a new run in an --out that already holds a checkpoint (its files are "
                     "replaced as the new run writes them)", &F::overwrite, true)
            .integer("stop-after", "0", "stop after this epoch with a checkpoint, to continue later with --resume (0 = "
                     "off)", &F::stop_after, true)
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
    require_one_of(command, "augment", f.augment, {"crop+flip", "none"});
    require(command, f.workers >= 0, "workers", f.workers, ">= 0");
}

void check_run_flags(const std::string& command, const RunFlags& f) {
    require(command, f.threads >= 0, "threads", f.threads, ">= 0 (0 = all cores)");
    require(command, f.seed >= 0, "seed", f.seed, ">= 0");
    require(command, f.eval_every >= 0, "eval-every", f.eval_every, ">= 0");
    require(command, f.eval_batch >= 1, "eval-batch", f.eval_batch, ">= 1");
    require(command, f.steps_per_epoch >= 0, "steps-per-epoch", f.steps_per_epoch, ">= 0 (0 = the whole set)");
    require(command, f.stop_after >= 0, "stop-after", f.stop_after, ">= 0 (0 = off)");
}

}  // namespace razor::apps
