// models/pretrained.cpp -- architecture from keys, and a file's state fitted to a model (see pretrained.h).
#include "models/pretrained.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "models/dialects.h"
#include "models/imagenet_vit.h"
#include "models/pos_embedding.h"

namespace razor::models {
namespace {

using State = std::map<std::string, Tensor>;

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

const Tensor* get(const State& s, const std::string& key) {
    auto it = s.find(key);
    return it == s.end() ? nullptr : &it->second;
}

// How many distinct N appear in keys "<prefix>N.<rest>" (stage blocks, transformer blocks).
int64_t count_indexed(const State& s, const std::string& prefix) {
    std::set<std::string> seen;
    for (auto it = s.lower_bound(prefix); it != s.end() && starts_with(it->first, prefix); ++it) {
        const size_t dot = it->first.find('.', prefix.size());
        if (dot != std::string::npos && dot > prefix.size()) seen.insert(it->first.substr(prefix.size(), dot - prefix.size()));
    }
    return static_cast<int64_t>(seen.size());
}

int64_t rows(const Tensor* head) { return head && head->dim() == 2 ? head->size(0) : 0; }

void identify_resnet(const State& s, CheckpointArchitecture& a) {
    std::vector<int64_t> blocks;
    for (int stage = 1; stage <= 4; ++stage) blocks.push_back(count_indexed(s, fmt("layer", stage, ".")));
    const bool bottleneck = get(s, "layer1.0.conv3.weight") != nullptr;
    a.dialect = "torchvision";
    a.num_classes = rows(get(s, "fc.weight"));
    a.detail = fmt(bottleneck ? "bottleneck" : "basic", " blocks ", blocks[0], "-", blocks[1], "-", blocks[2], "-",
                   blocks[3]);
    const std::vector<int64_t> two = {2, 2, 2, 2}, three = {3, 4, 6, 3};
    if (!bottleneck && blocks == two) a.model = "resnet18";
    else if (!bottleneck && blocks == three) a.model = "resnet34";
    else if (bottleneck && blocks == three) a.model = "resnet50";
}

// The keys of one ViT dialect: class token, position embedding, patch projection, blocks' prefix, head weight.
struct ViTKeys {
    const char *dialect, *cls, *pos, *patch, *blocks, *head;
};

void identify_vit(const State& s, const ViTKeys& k, CheckpointArchitecture& a) {
    const Tensor *cls = get(s, k.cls), *pos = get(s, k.pos), *patch = get(s, k.patch);
    a.dialect = k.dialect;
    a.depth = count_indexed(s, k.blocks);
    a.num_classes = rows(get(s, k.head));
    if (!cls || cls->dim() != 3 || !patch || patch->dim() != 4) {
        a.detail = "a ViT class token without a (D, C, p, p) patch projection";
        return;
    }
    const int64_t D = cls->size(2), p = patch->size(2);
    if (pos && pos->dim() == 3) {
        const auto g = static_cast<int64_t>(std::lround(std::sqrt(pos->size(1) - 1.0)));
        if (g * g + 1 == pos->size(1)) a.image_size = g * p;
    }
    a.detail = fmt("ViT width ", D, ", patch ", p, ", ", a.depth, " blocks");
    if (p == 16 && D == 768) a.model = "vit_b_16";
    else if (p == 16 && D == 384) a.model = "vit_s_16";
}

}  // namespace

CheckpointArchitecture identify_checkpoint(const State& state_in) {
    State stripped;
    const State* s = &state_in;
    if (!state_in.empty() && std::all_of(state_in.begin(), state_in.end(),
                                         [](const auto& kv) { return starts_with(kv.first, "module."); })) {
        for (const auto& [key, t] : state_in) stripped[key.substr(7)] = t;
        s = &stripped;
    }
    CheckpointArchitecture a;
    static const ViTKeys vits[] = {
        {"torchvision", "class_token", "encoder.pos_embedding", "conv_proj.weight", "encoder.layers.encoder_layer_",
         "heads.head.weight"},
        {"timm", "cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.", "head.weight"},
        {"huggingface", "embeddings.cls_token", "embeddings.position_embeddings",
         "embeddings.patch_embeddings.projection.weight", "encoder.layer.", "classifier.weight"},
        {"huggingface", "vit.embeddings.cls_token", "vit.embeddings.position_embeddings",
         "vit.embeddings.patch_embeddings.projection.weight", "vit.encoder.layer.", "classifier.weight"}};
    for (const ViTKeys& k : vits)
        if (get(*s, k.cls)) {
            identify_vit(*s, k, a);
            return a;
        }
    if (get(*s, "conv1.weight") && get(*s, "fc.weight") && get(*s, "layer1.0.conv1.weight")) {
        identify_resnet(*s, a);
    } else if (get(*s, "features.0.0.weight") && get(*s, "features.1.conv.0.0.weight") &&
               get(*s, "classifier.1.weight")) {
        a.dialect = "torchvision";
        a.num_classes = rows(get(*s, "classifier.1.weight"));
        a.detail = fmt("MobileNetV2 features 0-", count_indexed(*s, "features.") - 1);
        if (count_indexed(*s, "features.") == 19) a.model = "mobilenet_v2";
    } else {
        a.detail = "none of the layouts razor can tell apart by their keys (torchvision's / timm's resnet18/34/50, "
                   "mobilenet_v2, ViTs in torchvision's, timm's or Hugging Face's names)";
    }
    return a;
}

FittedState fit_state(const State& file_state, const nn::Module& model, const std::string& head,
                      const std::string& source) {
    RenamedState renamed = to_model_keys(file_state, model, source);
    FittedState f;
    f.dialect = renamed.dialect;
    const State expected = model.state_dict();
    if (const auto* vit = dynamic_cast<const ImageNetViT*>(&model)) {
        auto it = renamed.state.find("encoder.pos_embedding");
        const Tensor& own = vit->encoder->pos_embedding;
        if (it != renamed.state.end() && it->second.dim() == 3 && it->second.size(1) != own.size(1) &&
            it->second.size(2) == own.size(2)) {
            const int64_t grid = vit->config.image_size / vit->config.patch_size;
            const auto g = std::lround(std::sqrt(it->second.size(1) - 1.0));
            it->second = resize_pos_embedding(it->second, grid, source);
            f.resized = fmt("position embedding ", g, "x", g, " -> ", grid, "x", grid, " (bicubic)");
        }
    }
    const std::string prefix = head.empty() ? "" : head + ".";
    auto is_head = [&](const std::string& key) {
        return head.empty() ? key.find('.') == std::string::npos
                            : starts_with(key, prefix) && key.find('.', prefix.size()) == std::string::npos;
    };
    auto fits = [](const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && a.dtype() == b.dtype(); };
    if (auto it = renamed.state.find(prefix + "weight"); it != renamed.state.end()) f.file_head = it->second.shape();
    f.head_fits = true;
    for (const auto& [key, t] : expected)
        if (is_head(key)) {
            const Tensor* got = get(renamed.state, key);
            f.head_fits = f.head_fits && got && fits(*got, t);
        }
    for (const auto& [key, t] : renamed.state) {
        auto it = expected.find(key);
        if (is_head(key)) {
            if (f.head_fits && it != expected.end()) f.state[key] = t;
        } else if (it == expected.end()) {
            f.unexpected.push_back(key);
        } else if (!fits(t, it->second)) {
            f.mismatched.push_back(fmt(key, " ", shape_str(t.shape()), " vs ", shape_str(it->second.shape())));
        } else {
            f.state[key] = t;
        }
    }
    for (const auto& [key, t] : expected)
        if (!is_head(key) && !renamed.state.count(key)) f.missing.push_back(key);
    return f;
}

std::map<std::string, std::string> published_preprocessing(const std::string& dialect) {
    if (dialect == "torchvision")
        return {{"normalize_mean", "0.485,0.456,0.406"}, {"normalize_std", "0.229,0.224,0.225"},
                {"interpolation", "bilinear"}};
    if (dialect == "timm")
        return {{"normalize_mean", "0.5,0.5,0.5"}, {"normalize_std", "0.5,0.5,0.5"}, {"interpolation", "bicubic"}};
    if (dialect == "huggingface")
        return {{"normalize_mean", "0.5,0.5,0.5"}, {"normalize_std", "0.5,0.5,0.5"}, {"interpolation", "bilinear"}};
    return {};
}

}  // namespace razor::models
