// apps/info.cpp -- `razor info --model M`: a model's layers, parameters, FLOPs and tape bytes, without training.
// `razor info --checkpoint FILE` describes a weights file instead (apps/checkpoint_info.h).
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
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/checkpoint_info.h"
#include "apps/flag_table.h"
#include "apps/commands.h"
#include "apps/threads.h"
#include "apps/razor_flags.h"
#include "apps/run_flags.h"
#include "train/plot.h"
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

// STEM.csv: every (module, op) row; STEM.svg: stored vs dense-equivalent bytes per op family (labelled B, KiB, MiB or GiB), largest first.
void write_tape_files(const models::ModelSummary& s, const std::string& stem, const std::string& title) {
    std::string csv = "module,op,shape,items,stored_bytes,dense_bytes,ratio,saved\n";
    for (const auto& r : s.tape)
        csv += fmt(csv_field(r.path), ",", r.op, ",", csv_field(shape_str(r.shape)), ",", r.items, ",", r.stored_bytes,
                   ",", r.dense_bytes, ",", r.stored_bytes ? double(r.dense_bytes) / r.stored_bytes : 0.0, ",",
                   csv_field(r.saved), "\n");
    csv += fmt("(total),,,", s.saved_items, ",", s.saved_bytes, ",", s.saved_dense_bytes, ",",
               s.saved_bytes ? double(s.saved_dense_bytes) / s.saved_bytes : 0.0, ",\n");
    write_file_atomic(stem + ".csv", csv);

    std::map<std::string, std::pair<double, double>> by_op;   // op -> (dense, stored) bytes
    for (const auto& r : s.tape)
        by_op[r.op].first += static_cast<double>(r.dense_bytes), by_op[r.op].second += static_cast<double>(r.stored_bytes);
    std::vector<std::pair<std::string, std::pair<double, double>>> ops(by_op.begin(), by_op.end());
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::vector<std::string> categories;
    train::BarSeries dense{"dense-equivalent", {}}, stored{"stored", {}};
    for (const auto& [op, v] : ops) categories.push_back(op), dense.values.push_back(v.first), stored.values.push_back(v.second);
    categories.push_back("total");
    dense.values.push_back(static_cast<double>(s.saved_dense_bytes));
    stored.values.push_back(static_cast<double>(s.saved_bytes));
    train::write_svg_bars(stem + ".svg", title, categories, {dense, stored},
                          [](double bytes) { return format_bytes(std::llround(bytes)); });
}


struct InfoOptions {
    ModelInputFlags input;
    std::string out, checkpoint;
    int64_t batch = 1, depth = 0, threads = 0;
    bool tape = false, list = false;
    RazorFlags razor;
};

constexpr const char* kSummary =
    "print a model's layers: output shapes, parameters, forward FLOPs, saved-activation bytes";

const FlagTable<InfoOptions>& info_flags() {
    using O = InfoOptions;
    static const FlagTable<O> table =
        FlagTable<O>()
            .family(model_input_flag_family(), &O::input)
            .integer("batch", "1", "batch size of the forward whose tape is measured", &O::batch)
            .integer("depth", "0", "vit_tiny: number of transformer blocks (0 = 12)", &O::depth)
            .integer("threads", "0", "OpenMP threads (0 = OMP_NUM_THREADS if set, else all cores)", &O::threads)
            .family(razor_flag_family(), &O::razor)   // --razor R > 0 prints the tape breakdown
            .boolean("tape", "print the tape breakdown (per module and op: stored vs dense-equivalent) for the dense "
                     "tape", &O::tape)
            .text("out", "runs/info", "folder for the tape breakdown's CSV and SVG (with --razor or --tape)", &O::out)
            .boolean("list", "print the model names and exit", &O::list)
            .text("checkpoint", "", "describe a weights file (.safetensors, .pth, .pt, .bin) or a razor run folder "
                  "instead: tensors, dtypes, size, the model and key dialect it matches, its head's classes",
                  &O::checkpoint);
    return table;
}

int info(const InfoOptions& o) {
    if (o.list) {
        for (const auto& n : models::model_names()) std::printf("%s\n", n.c_str());
        return 0;
    }
    if (!o.checkpoint.empty()) {
        std::printf("%s", describe_checkpoint(o.checkpoint).c_str());
        return 0;
    }
    const int64_t batch = o.batch, classes = o.input.classes;
    if (batch < 1) throw Error(fmt("razor info: --batch must be >= 1, got ", batch));
    const RazorFlags& razor_flags = o.razor;
    const double razor = razor_flags.ratio;
    SavePolicyGuard save_policy(razor_policy_from_flags("razor info", razor_flags));
    const bool tape = razor > 0 || o.tape;
    apply_threads("razor info", o.threads);

    models::ModelOptions options;
    options.in_channels = o.input.channels;
    options.image_size = o.input.image_size;
    options.depth = o.depth;
    Generator gen(0);
    const std::string& name = o.input.model;
    auto model = models::make_model(name, classes, gen, options);
    keep_layers_dense(*model, razor_flags);

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
        const std::string gelu = razor_flags.gelu, attn = razor_flags.attn;
        std::snprintf(tag, sizeof tag, "r%.2f-%s%s%s", razor, razor_flags.values.c_str(),
                      gelu == "d4" ? "" : ("-gelu-" + gelu).c_str(), attn == "int8" ? "" : ("-attn-" + attn).c_str());
    } else {
        std::snprintf(tag, sizeof tag, "dense");
    }
    std::filesystem::create_directories(o.out);
    const std::string stem = (std::filesystem::path(o.out) / fmt("tape-", name, "-b", batch, "-", tag)).string();
    write_tape_files(summary, stem, fmt(name, ", batch ", batch, ": saved activations per op, ", policy));
    std::printf("wrote  %s.csv, %s.svg\n", stem.c_str(), stem.c_str());
    return 0;
}

}  // namespace

int run_info(const std::vector<std::string>& argv) {
    return run_with_flags(info_flags(), "info", kSummary, argv, info);
}

}  // namespace razor::apps
