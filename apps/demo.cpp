// apps/demo.cpp -- `razor demo`: the README's main job.
//
// Trains a small CNN (two conv-BN-ReLU-maxpool stages, 32 and 64 channels, then a linear classifier; or an MLP with
// --model mlp) on Fashion-MNIST from Debian's dataset-fashion-mnist with SGD (Nesterov momentum), then prints test accuracy, speed and memory, and writes a JSONL log, an SVG plot of the curves and a
// safetensors checkpoint (PyTorch key names) into --out. A few minutes on 2 cores.
//
// The loop is razor train's (train/fit.h with the dense step: zero_grad, forward, loss, backward, step), without
// checkpoints: a cosine lr from --lr to 0 stepped every iteration, every epoch evaluated.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/commands.h"
#include "apps/demo_model.h"
#include "apps/threads.h"
#include "apps/flag_table.h"
#include "core/core.h"
#include "data/idx.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/scheduler.h"
#include "optim/sgd.h"
#include "train/data_splits.h"
#include "train/epoch_record.h"
#include "train/fit.h"
#include "train/steps.h"

namespace razor::apps {
namespace {

struct DemoOptions {
    std::string model, data, out;
    int64_t epochs = 3, batch = 128, hidden = 256, threads = 0, seed = 0, steps_per_epoch = 0, eval_steps = 0;
    double lr = 0.01;
};

constexpr const char* kSummary = "train a small CNN on Fashion-MNIST and report accuracy, speed and memory";

const FlagTable<DemoOptions>& demo_flags() {
    using O = DemoOptions;
    static const FlagTable<O> table =
        FlagTable<O>()
            .text("model", "cnn", "cnn (2 conv-BN-ReLU-pool stages + linear) or mlp (784-hidden-10)", &O::model)
            .integer("epochs", "3", "passes over the 60k training images", &O::epochs)
            .integer("batch", "128", "images per step", &O::batch)
            .integer("steps-per-epoch", "0", "stop each epoch after N steps (0 = the whole training set; for quick "
                     "runs)", &O::steps_per_epoch)
            .integer("eval-steps", "0", "evaluate on at most N batches of 1000 test images (0 = all 10k)",
                     &O::eval_steps)
            .real("lr", "0.01", "SGD learning rate (Nesterov momentum 0.9, cosine decay to 0)", &O::lr)
            .integer("hidden", "256", "width of the MLP's hidden layer", &O::hidden)
            .integer("threads", "0", "OpenMP threads (0 = OMP_NUM_THREADS if set, else all cores)", &O::threads)
            .integer("seed", "0", "seed for init and shuffling", &O::seed)
            .text("data", "", "folder with the Fashion-MNIST IDX files (default: datasets/fashion-mnist from razor "
                  "data fetch, else Debian's /usr/share/datasets/fashion-mnist)", &O::data)
            .text("out", "runs/demo", "folder for log.jsonl, curves.svg and model.safetensors", &O::out);
    return table;
}

// The CNN (apps/demo_model.h): conv(1->32) BN ReLU pool -> conv(32->64) BN ReLU pool -> linear(64*7*7 -> 10): about
// 4 M MACs per image. Half these widths underfit (test 89.0 % after 3 epochs, 89.7 % after 5); this width reaches
// 90.8 % in 3 epochs at lr 0.01. At lr 0.05 the 3136-input classifier makes the first hundred steps blow up (loss ~2 there, 87 % test after 3 epochs),
// in PyTorch exactly as here, so the default lr is 0.01 (with Nesterov momentum 0.9: an effective step of 0.1).
int demo(const DemoOptions& o) {
    if (o.epochs < 1 || o.batch < 1 || o.hidden < 1 || o.lr <= 0)
        throw Error(fmt("razor demo: --epochs, --batch, --hidden must be >= 1 and --lr > 0; got ", o.epochs, ", ",
                        o.batch, ", ", o.hidden, ", ", o.lr));
    if (o.steps_per_epoch < 0 || o.eval_steps < 0)
        throw Error(fmt("razor demo: --steps-per-epoch and --eval-steps must be >= 0 (0 = all); got ",
                        o.steps_per_epoch, " and ", o.eval_steps));
    apply_threads("razor demo", o.threads);
    std::printf("%s\n", runtime_banner().c_str());

    const train::DataSplits data = train::load_splits("razor demo", "fashion-mnist", o.data, "");
    std::printf("data   %s: %lld train, %lld test images %s\n", data.dir.c_str(),
                static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
                shape_str(data.train.image_shape()).c_str());

    Generator gen(static_cast<uint64_t>(o.seed));
    if (o.model != "cnn" && o.model != "mlp")
        throw Error(fmt("razor demo: --model must be cnn or mlp, got '", o.model, "'"));
    const std::string model_name = "demo-" + o.model;   // the name its checkpoint records (apps/demo_model.h)
    const std::shared_ptr<nn::Module> net = make_demo_model(model_name, 10, 1, 28, o.hidden, gen);
    nn::Module& model = *net;
    std::printf("model  %s: %lld parameters (%s)\n", o.model.c_str(), static_cast<long long>(model.num_parameters()),
                format_bytes(model.num_parameters() * 4).c_str());

    data::DataLoader loader = train::train_loader(data, false, o.batch, o.seed, 1, /*drop_last=*/true);
    optim::SGD opt(model.named_parameters(), {.lr = o.lr, .momentum = 0.9, .nesterov = true});
    const int64_t spe = o.steps_per_epoch > 0 ? std::min(o.steps_per_epoch, loader.size()) : loader.size();
    optim::CosineAnnealingLR sched(opt, o.epochs * spe);
    std::filesystem::create_directories(o.out);
    train::RunLog log("razor demo", o.out + "/log.jsonl", nullptr, o.out + "/curves.svg");
    train::DenseStep step(model, opt, &sched, {});
    train::FitHooks hooks;
    hooks.evaluate = [&](int64_t) {
        return train::evaluate(model, data.test, data.mean, data.std, 1000,
                               {.max_batches = o.eval_steps, .progress = "test"});
    };
    hooks.line = train::epoch_line;
    hooks.record = train::epoch_json;
    const train::FitResult r = train::fit(model, loader, step, log, {.command = "razor demo", .epochs = o.epochs,
                                                                     .steps_per_epoch = spe, .batch = o.batch}, hooks);

    // What razor eval --checkpoint OUT needs to rebuild and feed the model (train/data_splits.h model_metadata).
    std::map<std::string, std::string> metadata = train::model_metadata(model_name, "fashion-mnist", data);
    if (o.model == "mlp") metadata["hidden"] = fmt(o.hidden);
    metadata["epoch"] = fmt(o.epochs);
    save_safetensors(o.out + "/model.safetensors", model.state_dict(), metadata);
    std::printf("\nresult  test accuracy %.2f%%  |  %.0f img/s on %d thread%s  |  tape peak %s  |  tensor peak %s  |  "
                "peak RSS %s\n",
                100 * r.last->eval->accuracy, r.last->img_per_s, num_threads(), num_threads() == 1 ? "" : "s",
                format_bytes(r.tape.stored_bytes).c_str(), format_bytes(memory_stats().peak_bytes).c_str(),
                format_bytes(peak_rss_bytes()).c_str());
    std::printf("wrote   %s/log.jsonl, %s/curves.svg, %s/model.safetensors\n", o.out.c_str(), o.out.c_str(),
                o.out.c_str());
    return 0;
}

}  // namespace

int run_demo(const std::vector<std::string>& argv) {
    return run_with_flags(demo_flags(), "demo", kSummary, argv, demo);
}

}  // namespace razor::apps
