// apps/checkpoint_model.cpp -- see checkpoint_model.h.
#include "apps/checkpoint_model.h"

#include "apps/demo_model.h"
#include "apps/run_flags.h"
#include "core/check.h"
#include "models/registry.h"
#include "train/data_splits.h"

namespace razor::apps {

const FlagTable<CheckpointFlags>& checkpoint_flag_family() {
    using F = CheckpointFlags;
    static const FlagTable<F> table =
        FlagTable<F>()
            .text("checkpoint", "", "run folder (uses last/), checkpoint folder (runs/x/best) or .safetensors file",
                  &F::checkpoint)
            .integer("batch", "16", "images per batch", &F::batch)
            .integer("threads", "0", "OpenMP threads (0 = OMP_NUM_THREADS if set, else all cores)", &F::threads)
            .boolean("json", "print one JSON line instead of the table", &F::json);
    return table;
}

void check_checkpoint_flags(const std::string& command, const CheckpointFlags& f) {
    if (f.batch < 1) throw Error(fmt(command, ": --batch must be >= 1, got ", f.batch));
    if (f.threads < 0) throw Error(fmt(command, ": --threads must be >= 0 (0 = all cores), got ", f.threads));
    if (f.threads > kMaxThreads) throw Error(fmt(command, ": --threads must be <= ", kMaxThreads, ", got ", f.threads));
}

CheckpointInputs read_checkpoint_inputs(const std::string& command, const train::Checkpoint& ck) {
    const auto meta = [&](const char* key) {
        auto it = ck.model_metadata.find(key);
        return it == ck.model_metadata.end() ? std::string() : it->second;
    };
    const auto numbers = [&](const char* key) {
        return train::parse_number_list(command, fmt(key, " (checkpoint metadata)"), meta(key));
    };
    const auto number = [&](const char* key, double fallback) {
        const std::vector<double> v = numbers(key);
        if (v.size() > 1)
            throw Error(fmt(command, ": checkpoint metadata ", key, " in ", ck.folder, " holds ", v.size(),
                            " numbers; expected one; hint: the metadata was edited or damaged"));
        return v.empty() ? fallback : v[0];
    };
    CheckpointInputs in;
    in.model = meta("model"), in.dataset = meta("dataset"), in.data = meta("data");
    in.class_names = train::metadata_class_names(ck.model_metadata);
    in.num_classes = static_cast<int64_t>(number("num_classes", 0));
    in.in_channels = static_cast<int64_t>(number("in_channels", 3));
    in.image_size = static_cast<int64_t>(number("image_size", 0));
    in.crop_pct = number("crop_pct", 1);
    if (!meta("interpolation").empty())
        in.interpolation = data::parse_interpolation(meta("interpolation"), command + ": checkpoint metadata interpolation");
    for (double v : numbers("normalize_mean")) in.mean.push_back(static_cast<float>(v));
    for (double v : numbers("normalize_std")) in.std.push_back(static_cast<float>(v));
    in.val_split = number("val_split", 0);
    in.val_seed = static_cast<uint64_t>(number("val_seed", 0));
    for (double w : numbers("widths")) in.widths.push_back(static_cast<int64_t>(w));
    in.depth = static_cast<int64_t>(number("depth", 0));
    return in;
}

std::shared_ptr<nn::Module> model_from_checkpoint(const std::string& command, const train::Checkpoint& ck,
                                                  const std::string& name, int64_t classes, const CheckpointInputs& in) {
    Generator gen(0);
    // razor demo's models are not in the zoo; their checkpoint names them (apps/demo_model.h).
    auto model = is_demo_model(name)
                     ? make_demo_model(name, classes, in.in_channels, in.image_size, demo_hidden(ck.model_metadata, 256), gen)
                     : models::make_model(name, classes, gen, {.in_channels = in.in_channels, .image_size = in.image_size,
                                                               .depth = in.depth, .widths = in.widths});
    try {
        model->load_state_dict(ck.model);
    } catch (const Error& e) {
        throw Error(fmt(command, ": the checkpoint in ", ck.folder, " does not fit --model ", name, " with ", classes,
                        " classes and (", in.in_channels, ", ", in.image_size, ", ", in.image_size, ") images: ", e.what()));
    }
    return model;
}

}  // namespace razor::apps
