// apps/eval.cpp -- `razor eval`: a checkpoint's test accuracy, loss, per-class accuracy and speed.
//
// reference: the evaluation half of a PyTorch CIFAR script (model.eval(), torch.no_grad(), argmax accuracy, mean
// cross-entropy). docs: docs/cli.md "razor eval".
//
// --checkpoint takes a run folder (its last/ checkpoint), a checkpoint folder (runs/x/best) or a model.safetensors
// file, also one written by PyTorch with safetensors.torch.save_file(model.state_dict()). The weights are loaded
// strictly: a checkpoint that does not fit --model and the number of classes fails with the missing, unexpected and
// wrongly shaped keys and a hint. Everything else defaults to what razor train stored in the file's metadata
// (train/data_splits.h model_metadata): the model name, dataset and its folder, the class names (the classes are
// picked from the test set by name, so a run on a class subset evaluates on that subset), the resolution, eval crop,
// interpolation and normalisation -- `razor eval --checkpoint RUN` needs nothing else. A folder is evaluated on its
// test/ split, else on val/ (or the val carved by --val-split, redrawn from the recorded fraction and seed).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/flag_table.h"
#include "apps/checkpoint_model.h"
#include "apps/commands.h"
#include "apps/threads.h"
#include "core/core.h"
#include "train/checkpoint.h"
#include "train/data_splits.h"
#include "train/evaluate.h"
#include "data/loader.h"
#include "data/preprocess.h"

namespace razor::apps {
using train::Checkpoint;

namespace {
struct EvalOptions {
    CheckpointFlags c;   // --checkpoint, --batch, --threads, --json
    std::string model, dataset, data, classes, save_logits;
};

constexpr const char* kSummary = "evaluate a checkpoint on a test set: accuracy, loss, per-class accuracy, img/s";

const FlagTable<EvalOptions>& eval_flags() {
    using O = EvalOptions;
    static const FlagTable<O> table =
        FlagTable<O>()
            .family(checkpoint_flag_family(), &O::c)
            .text("model", "", "model name (default: the one stored in the checkpoint)", &O::model)
            .text("dataset", "", "cifar10 | cifar100 | fashion-mnist | folder (default: the checkpoint's, else "
                  "cifar10)", &O::dataset)
            .text("data", "", "dataset folder (default: the one the run was trained on; cifar10: the folder holding "
                  "test_batch.bin; a folder: its test/, else val/)", &O::data)
            .text("classes", "", "keep only these classes, relabelled 0..k-1 (as given to razor train)", &O::classes)
            .text("save-logits", "", "also write FILE.safetensors: the first --batch test images as the model sees "
                  "them ('input' (N, C, H, W)), its eval-mode 'logits' (N, classes) and 'labels' (for "
                  "scripts/check_interop.py)", &O::save_logits)
            .set_default("batch", "500");
    return table;
}

// The first batch of `test` as the model sees it, with its eval-mode logits and the labels, into `path`.
void save_logits(const std::string& path, nn::Module& model, const std::string& model_name,
                 const data::ImageDataset& test, const data::TransformPtr& transform, int64_t batch) {
    NoGradGuard no_grad;
    model.eval();
    data::DataLoader loader(test, transform, {.batch_size = batch, .shuffle = false, .drop_last = false, .workers = 0});
    const std::optional<data::Batch> b = loader.next();
    if (!b) throw Error(fmt("razor eval: --save-logits ", path, ": the test set ", test.name, " is empty"));
    const Tensor logits = model(b->images);   // (N, classes)
    save_safetensors(path, {{"input", b->images.contiguous()}, {"logits", logits.contiguous()}, {"labels", b->labels}},
                     {{"model", model_name}, {"dataset", test.name}});
    std::fprintf(stderr, "wrote  %s: input %s, logits %s\n", path.c_str(), shape_str(b->images.shape()).c_str(),
                shape_str(logits.shape()).c_str());
}

int eval(const EvalOptions& o) {
    const int64_t batch = o.c.batch, threads = o.c.threads;
    check_checkpoint_flags("razor eval", o.c);
    if (o.c.checkpoint.empty())
        throw Error("razor eval: --checkpoint is required; hint: --checkpoint runs/NAME (the --out of razor train, demo, "
                    "finetune or sparse-train)");
    apply_threads("razor eval", threads);

    const Checkpoint ck = train::open_checkpoint(o.c.checkpoint, /*model_only=*/true);
    CheckpointInputs in = read_checkpoint_inputs("razor eval", ck);
    auto meta = [&](const char* key, const std::string& fallback) {
        auto it = ck.model_metadata.find(key);
        return it == ck.model_metadata.end() || it->second.empty() ? fallback : it->second;
    };
    const std::string model_name = !o.model.empty() ? o.model : in.model;
    if (model_name.empty())
        throw Error(fmt("razor eval: the checkpoint names no model; hint: pass --model (razor info --list)"));
    const std::string dataset = !o.dataset.empty() ? o.dataset : in.dataset.empty() ? "cifar10" : in.dataset;
    // Everything else the run recorded: its folder, classes (names, in label order), resolution, crop and statistics.
    train::SplitOptions so;
    so.classes = o.classes;
    if (o.classes.empty()) so.class_names = in.class_names;
    so.image_size = in.image_size, so.crop_pct = in.crop_pct, so.interpolation = in.interpolation;
    so.val_split = in.val_split, so.val_seed = in.val_seed;
    so.mean = in.mean, so.std = in.std;
    so.need_train = in.mean.empty() && dataset == "folder";
    train::DataSplits data = train::load_splits("razor eval", dataset, !o.data.empty() ? o.data : in.data, so);
    // The head's outputs are the checkpoint's classes in its label order: --classes in another order is evaluated in
    // the checkpoint's (said so); other classes are refused, never scored under the wrong names. (Another number of
    // classes does not fit the head: the strict load below says so, with the keys.)
    const auto& got = (data.test.size() > 0 ? data.test : data.val).classes;
    if (!in.class_names.empty() && got.size() == in.class_names.size() && got != in.class_names) {
        auto a = got, b = in.class_names;
        std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
        if (a != b)
            throw Error(fmt("razor eval: the test split holds the classes ", train::join_names(got), " but the "
                            "checkpoint ", ck.folder, " was trained on ", train::join_names(in.class_names),
                            "; expected the same classes; hint: pass the checkpoint's classes to --classes, or --data "
                            "with a test/ split of them"));
        std::fprintf(stderr, "razor eval: note: --classes %s: evaluated in the checkpoint's label order %s\n",
                     o.classes.c_str(), train::join_names(in.class_names).c_str());
        so.classes.clear(), so.class_names = in.class_names;
        data = train::load_splits("razor eval", dataset, !o.data.empty() ? o.data : in.data, so);
    }
    const data::ImageDataset& test = data.test.size() > 0 ? data.test : data.val;
    const Shape image = {test.image_shape()[0], data.image_size, data.image_size};   // (C, H, W) the model sees
    const int64_t K = test.num_classes;
    in.in_channels = image[0], in.image_size = data.image_size;
    auto model = model_from_checkpoint("razor eval", ck, model_name, K, in);
    const data::TransformPtr transform = data::eval_transform(data.preprocess());
    const train::EvalResult r = train::evaluate(*model, test, transform, batch);
    if (!o.save_logits.empty()) save_logits(o.save_logits, *model, model_name, test, transform, batch);

    auto class_name = [&](int64_t k) {
        return k < static_cast<int64_t>(test.classes.size()) ? test.classes[k] : fmt("class ", k);
    };
    if (o.c.json) {
        nlohmann::json per_class = nlohmann::json::array();
        for (int64_t k = 0; k < K; ++k)
            per_class.push_back({{"class", class_name(k)},
                                 {"images", r.class_total[k]},
                                 {"accuracy", r.class_total[k] ? double(r.class_correct[k]) / r.class_total[k] : 0.0}});
        const nlohmann::json j = {{"model", model_name},        {"checkpoint", ck.folder},
                                  {"epoch", meta("epoch", "")}, {"dataset", dataset},
                                  {"images", r.images},         {"accuracy", r.accuracy},
                                  {"loss", r.loss},             {"img_per_s", r.images_per_second},
                                  {"threads", num_threads()},   {"per_class", per_class}};
        std::printf("%s\n", j.dump().c_str());
        return 0;
    }
    std::printf("%s\n", runtime_banner().c_str());
    std::printf("eval   %s from %s (epoch %s) on %s: %lld test images %s\n\n", model_name.c_str(), ck.folder.c_str(),
                meta("epoch", "?").c_str(), test.name.c_str(), static_cast<long long>(r.images),
                shape_str(image).c_str());
    std::printf("%-16s %9s %8s\n", "class", "accuracy", "images");
    for (int64_t k = 0; k < K; ++k)
        std::printf("%-16s %8.1f%% %8lld\n", class_name(k).c_str(),
                    r.class_total[k] ? 100.0 * r.class_correct[k] / r.class_total[k] : 0.0,
                    static_cast<long long>(r.class_total[k]));
    std::printf("\nresult  test accuracy %.2f%%  loss %.4f  |  %.0f img/s on %d thread%s\n", 100 * r.accuracy, r.loss,
                r.images_per_second, num_threads(), num_threads() == 1 ? "" : "s");
    return 0;
}

}  // namespace

int run_eval(const std::vector<std::string>& argv) {
    return run_with_flags(eval_flags(), "eval", kSummary, argv, eval);
}

}  // namespace razor::apps
