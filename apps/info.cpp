// apps/info.cpp -- `razor info --model M`: a model's layers, parameters, FLOPs and tape bytes, without training.
//
// Builds the model from the zoo (models/registry.h), runs one training-mode forward at --batch on random input,
// and prints models::format_summary: per module its path, type, output shape, own parameters, forward FLOPs
// (2 x MACs; conv: output elements x IC/groups x K x K) and the bytes the tape saved for it (current_tape(),
// ReLUs at 1 bit per element), then the totals. docs/models.md lists the tables for every model.
//
// --razor R [--razor-values V] runs that forward under Back Razor's save policy and adds the tape breakdown
// (models::format_tape): per (module, op) what it saved, in which form, stored vs dense-equivalent bytes and their
// ratio, the totals per op and overall. --tape prints the same for the dense tape. Both also write the breakdown as
// CSV (every row) and an SVG bar chart (stored vs dense per op) into --out. docs/back-razor.md "razor info".
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/args.h"
#include "apps/commands.h"
#include "apps/finetune.h"
#include "apps/plot.h"
#include "core/core.h"
#include "models/registry.h"
#include "models/summary.h"

namespace razor::apps {
namespace {

std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"") == std::string::npos) return v;
    std::string q = "\"";
    for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

// STEM.csv: every (module, op) row; STEM.svg: stored vs dense-equivalent MiB per op family, largest first.
void write_tape_files(const models::ModelSummary& s, const std::string& stem, const std::string& title) {
    std::string csv = "module,op,shape,items,stored_bytes,dense_bytes,ratio,saved\n";
    for (const auto& r : s.tape)
        csv += fmt(csv_field(r.path), ",", r.op, ",", csv_field(shape_str(r.shape)), ",", r.items, ",", r.stored_bytes,
                   ",", r.dense_bytes, ",", r.stored_bytes ? double(r.dense_bytes) / r.stored_bytes : 0.0, ",",
                   csv_field(r.saved), "\n");
    csv += fmt("(total),,,", s.saved_items, ",", s.saved_bytes, ",", s.saved_dense_bytes, ",",
               s.saved_bytes ? double(s.saved_dense_bytes) / s.saved_bytes : 0.0, ",\n");
    write_file_atomic(stem + ".csv", csv);

    std::map<std::string, std::pair<double, double>> by_op;   // op -> (dense, stored) MiB
    for (const auto& r : s.tape)
        by_op[r.op].first += r.dense_bytes / 1048576.0, by_op[r.op].second += r.stored_bytes / 1048576.0;
    std::vector<std::pair<std::string, std::pair<double, double>>> ops(by_op.begin(), by_op.end());
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::vector<std::string> categories;
    BarSeries dense{"dense-equivalent", {}}, stored{"stored", {}};
    for (const auto& [op, v] : ops) categories.push_back(op), dense.values.push_back(v.first), stored.values.push_back(v.second);
    categories.push_back("total");
    dense.values.push_back(s.saved_dense_bytes / 1048576.0);
    stored.values.push_back(s.saved_bytes / 1048576.0);
    write_svg_bars(stem + ".svg", title, "MiB", categories, {dense, stored});
}

}  // namespace

int run_info(const std::vector<std::string>& argv) {
    Args args("info", "print a model's layers: output shapes, parameters, forward FLOPs, saved-activation bytes");
    args.flag("model", "resnet20", models::model_names_joined())
        .flag("classes", "10", "number of classes (the head's outputs)")
        .flag("batch", "1", "batch size of the forward whose tape is measured")
        .flag("channels", "3", "input channels")
        .flag("image-size", "32", "input height = width (28 for MNIST-style mlp / lenet5)")
        .flag("depth", "0", "vit_tiny: number of transformer blocks (0 = 12)")
        .flag("threads", "0", "OpenMP threads (0 = all cores)")
        .flag("razor", "0", fmt(kRazorHelp, "; prints the tape breakdown"))
        .flag("razor-values", "fp32", kRazorValuesHelp)
        .flag("razor-gelu", "d4", kRazorGeluHelp)
        .flag("razor-bn", "dense", kRazorBnHelp)
        .flag("razor-attn", "int8", kRazorAttnHelp)
        .boolean("tape", "print the tape breakdown (per module and op: stored vs dense-equivalent) for the dense tape")
        .flag("out", "runs/info", "folder for the tape breakdown's CSV and SVG (with --razor or --tape)")
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
    const double razor = args.real("razor");
    SavePolicyGuard save_policy(razor_policy_from_flags("razor info", razor_flags(args)));
    const bool tape = razor > 0 || args.on("tape");
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
    if (!tape) return 0;
    const std::string policy = active_save_policy().name();
    std::printf("\ntape breakdown, %s, batch %lld (after one training-mode forward)\n\n%s", policy.c_str(),
                static_cast<long long>(batch), models::format_tape(summary).c_str());
    char tag[64];
    if (razor > 0) {
        const std::string gelu = args.str("razor-gelu"), attn = args.str("razor-attn");
        std::snprintf(tag, sizeof tag, "r%.2f-%s%s%s", razor, args.str("razor-values").c_str(),
                      gelu == "d4" ? "" : ("-gelu-" + gelu).c_str(), attn == "int8" ? "" : ("-attn-" + attn).c_str());
    } else {
        std::snprintf(tag, sizeof tag, "dense");
    }
    std::filesystem::create_directories(args.str("out"));
    const std::string stem = (std::filesystem::path(args.str("out")) / fmt("tape-", name, "-b", batch, "-", tag)).string();
    write_tape_files(summary, stem, fmt(name, ", batch ", batch, ": saved-activation MiB, ", policy));
    std::printf("wrote  %s.csv, %s.svg\n", stem.c_str(), stem.c_str());
    return 0;
}

}  // namespace razor::apps
