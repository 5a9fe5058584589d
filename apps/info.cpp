// apps/info.cpp -- `razor info --model M`: a model's layers, parameters, FLOPs and tape bytes, without training.
//
// Builds the model from the zoo (models/registry.h), runs one training-mode forward at --batch on random input,
// and prints models::format_summary: per module its path, type, output shape, own parameters, forward FLOPs
// (2 x MACs; conv: output elements x IC/groups x K x K) and the bytes the tape saved for it (TapeAccounting,
// ReLUs at 1 bit per element), then the totals. docs/models.md lists the tables for every model.
#include <cstdio>

#include "apps/args.h"
#include "apps/commands.h"
#include "core/core.h"
#include "models/registry.h"
#include "models/summary.h"

namespace razor::apps {

int run_info(const std::vector<std::string>& argv) {
    std::string names;
    for (const auto& n : models::model_names()) names += (names.empty() ? "" : ", ") + n;
    Args args("info", "print a model's layers: output shapes, parameters, forward FLOPs, saved-activation bytes");
    args.flag("model", "resnet20", names)
        .flag("classes", "10", "number of classes (the head's outputs)")
        .flag("batch", "1", "batch size of the forward whose tape is measured")
        .flag("channels", "3", "input channels")
        .flag("image-size", "32", "input height = width (28 for MNIST-style mlp / lenet5)")
        .flag("depth", "0", "vit_tiny: number of transformer blocks (0 = 12)")
        .flag("threads", "0", "OpenMP threads (0 = all cores)")
        .boolean("list", "print the model names and exit");
    args.parse(argv);
    if (args.help_requested()) {
        std::printf("%s", args.usage().c_str());
        return 0;
    }
    if (args.on("list")) {
        for (const auto& n : models::model_names()) std::printf("%s\n", n.c_str());
        return 0;
    }
    const int64_t batch = args.integer("batch"), classes = args.integer("classes");
    if (batch < 1) throw Error(fmt("razor info: --batch must be >= 1, got ", batch));
    set_num_threads(static_cast<int>(args.integer("threads")));

    models::ModelOptions options;
    options.in_channels = args.integer("channels");
    options.image_size = args.integer("image-size");
    options.depth = args.integer("depth");
    Generator gen(0);
    const std::string name = args.str("model");
    auto model = models::make_model(name, classes, gen, options);

    std::printf("%s\n", runtime_banner().c_str());
    std::printf("model  %s, %lld classes, input (%lld, %lld, %lld, %lld)\n\n", name.c_str(),
                static_cast<long long>(classes), static_cast<long long>(batch),
                static_cast<long long>(options.in_channels), static_cast<long long>(options.image_size),
                static_cast<long long>(options.image_size));
    const models::ModelSummary summary =
        models::summarize(*model, {batch, options.in_channels, options.image_size, options.image_size});
    std::printf("%s", models::format_summary(summary).c_str());
    return 0;
}

}  // namespace razor::apps
