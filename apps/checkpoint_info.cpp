// apps/checkpoint_info.cpp -- razor info --checkpoint (see checkpoint_info.h).
#include "apps/checkpoint_info.h"

#include <filesystem>
#include <map>

#include "apps/finetune.h"
#include "core/core.h"
#include "models/pretrained.h"
#include "models/registry.h"
#include "train/checkpoint.h"

namespace razor::apps {
namespace {

int64_t metadata_int(const std::map<std::string, std::string>& m, const std::string& key, int64_t fallback) {
    auto it = m.find(key);
    if (it == m.end()) return fallback;
    try {
        return std::stoll(it->second);
    } catch (const std::exception&) {
        return fallback;
    }
}

std::string first(const std::vector<std::string>& items) {
    std::string s;
    for (size_t i = 0; i < items.size() && i < 3; ++i) s += (i ? ", " : "") + items[i];
    return items.size() > 3 ? fmt(s, ", ... (", items.size(), ")") : s;
}

}  // namespace

std::string describe_checkpoint(const std::string& path) {
    const train::Checkpoint ck = train::open_checkpoint(path, true);
    const auto& meta = ck.model_metadata;
    std::string out;
    auto format = meta.find("format");
    const bool pytorch = format != meta.end() && format->second == "pytorch";
    auto under = meta.find("state_dict_key");
    const std::string kind = !pytorch ? "safetensors"
                             : under == meta.end() || under->second.empty()
                                 ? "torch.save zip, the state dict at its top level"
                                 : "torch.save zip, the state dict under '" + under->second + "'";
    out += fmt("checkpoint  ", path, std::filesystem::is_regular_file(path)
                                         ? fmt(" (", kind, ", ",
                                               format_bytes(static_cast<int64_t>(std::filesystem::file_size(path))),
                                               " on disk)")
                                         : fmt(" (razor run, read from ", ck.folder, ")"), "\n");
    std::map<std::string, int64_t> dtypes;
    int64_t values = 0, bytes = 0;
    for (const auto& [key, t] : ck.model) {
        ++dtypes[dtype_name(t.dtype())];
        values += t.numel(), bytes += static_cast<int64_t>(t.nbytes());
    }
    std::string by_dtype;
    for (const auto& [name, n] : dtypes) by_dtype += fmt(by_dtype.empty() ? "" : ", ", n, " ", name);
    out += fmt("tensors     ", ck.model.size(), " (", by_dtype, " as loaded): ", values, " values, ", format_bytes(bytes),
               "\n");

    const models::CheckpointArchitecture arch = models::identify_checkpoint(ck.model);
    auto recorded = meta.find("model");
    const std::string name = recorded != meta.end() ? recorded->second : arch.model;
    if (name.empty()) {
        out += fmt("model       none razor can tell from the keys (", arch.detail,
                   "); hint: razor finetune --model NAME --from ", path, " names it, and lists the keys that differ\n");
        return out;
    }
    const int64_t classes = metadata_int(meta, "num_classes", arch.num_classes > 0 ? arch.num_classes : 1000);
    const int64_t image = metadata_int(meta, "image_size", arch.image_size > 0 ? arch.image_size : 224);
    Generator gen(0);
    auto model = models::make_model(name, classes, gen,
                                    {.in_channels = metadata_int(meta, "in_channels", 3), .image_size = image,
                                     .depth = name == arch.model && arch.depth != 12 ? arch.depth : 0});
    const std::string head = classifier_head(*model);
    const models::FittedState f = models::fit_state(ck.model, *model, head, path);
    out += fmt("model       ", name, recorded != meta.end() ? " (recorded in the file)" : " (from the keys: " + arch.detail + ")",
               ", ", f.dialect, " names; ",
               f.complete() ? fmt(f.state.size(), " tensors fit it", f.head_fits ? "" : " (the head aside)")
                            : fmt("does not fit: missing ", first(f.missing), "; unexpected ", first(f.unexpected),
                                  "; shapes ", first(f.mismatched)),
               "\n");
    out += fmt("head        '", head, "': ", f.file_head.empty() ? std::string("none in the file")
                                                                 : fmt(f.file_head[0], " classes (weight ",
                                                                       shape_str(f.file_head), ")"), "\n");
    if (arch.image_size > 0)
        out += fmt("image size  ", arch.image_size, " px (the position embedding's grid; at other sizes razor resizes "
                   "it when loading)\n");
    else if (recorded != meta.end())
        out += fmt("image size  ", image, " px (recorded)\n");
    else
        out += "image size  any (a CNN: the convolutions and the average pool take any size)\n";
    for (const auto& [key, value] : meta)
        if (key != "pair" && key != "format" && key != "state_dict_key") out += fmt("metadata    ", key, " = ", value, "\n");
    return out;
}

}  // namespace razor::apps
