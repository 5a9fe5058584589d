// models/dialects.cpp -- timm and Hugging Face key names -> torchvision's (see dialects.h).
#include "models/dialects.h"

#include <algorithm>
#include <optional>
#include <set>

namespace razor::models {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "blocks.3.norm1.weight" with prefix "blocks." -> {"3", "norm1.weight"}; nullopt when the key has no such form.
std::optional<std::pair<std::string, std::string>> indexed(const std::string& key, const std::string& prefix) {
    if (!starts_with(key, prefix)) return std::nullopt;
    const size_t dot = key.find('.', prefix.size());
    if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
    const std::string index = key.substr(prefix.size(), dot - prefix.size());
    if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
    return std::make_pair(index, key.substr(dot + 1));
}

// Replaces a leading `from` of `key` by `to`, or returns nullopt.
std::optional<std::string> swap_prefix(const std::string& key, const std::string& from, const std::string& to) {
    if (!starts_with(key, from)) return std::nullopt;
    return to + key.substr(from.size());
}

std::string vit_layer(const std::string& index) { return "encoder.layers.encoder_layer_" + index + "."; }

using Rules = std::vector<std::pair<std::string, std::string>>;   // (old prefix, new prefix), first match wins

// `key` renamed by the first rule whose prefix it starts with: `layer` rules for "<layers>N.rest" keys (the rest
// renamed, N kept as torchvision's encoder_layer_N), else the `top` rules; unmatched keys stay as they are.
std::string rename(const std::string& key, const std::string& layers, const Rules& layer, const Rules& top) {
    if (auto l = indexed(key, layers))
        for (const auto& [from, to] : layer)
            if (auto renamed = swap_prefix(l->second, from, to)) return vit_layer(l->first) + *renamed;
    for (const auto& [from, to] : top)
        if (auto renamed = swap_prefix(key, from, to)) return *renamed;
    return key;
}

// timm's VisionTransformer -> torchvision's.
std::string from_timm(std::string key) {
    static const Rules top = {{"cls_token", "class_token"},
                              {"pos_embed", "encoder.pos_embedding"},
                              {"patch_embed.proj.", "conv_proj."},
                              {"norm.", "encoder.ln."},
                              {"head.", "heads.head."}};
    static const Rules block = {{"norm1.", "ln_1."},
                                {"attn.qkv.weight", "self_attention.in_proj_weight"},
                                {"attn.qkv.bias", "self_attention.in_proj_bias"},
                                {"attn.proj.", "self_attention.out_proj."},
                                {"norm2.", "ln_2."},
                                {"mlp.fc1.", "mlp.0."},
                                {"mlp.fc2.", "mlp.3."}};
    return rename(key, "blocks.", block, top);
}

// Hugging Face's ViT -> torchvision's; q/k/v pieces are returned as "<layer>.qkv.<q|k|v>.<weight|bias>" for stacking.
std::string from_huggingface(std::string key) {
    if (auto k = swap_prefix(key, "vit.", "")) key = *k;
    static const Rules top = {{"embeddings.cls_token", "class_token"},
                              {"embeddings.position_embeddings", "encoder.pos_embedding"},
                              {"embeddings.patch_embeddings.projection.", "conv_proj."},
                              {"layernorm.", "encoder.ln."},
                              {"classifier.", "heads.head."}};
    static const Rules layer = {{"layernorm_before.", "ln_1."},
                                {"attention.attention.query.", "qkv.q."},
                                {"attention.attention.key.", "qkv.k."},
                                {"attention.attention.value.", "qkv.v."},
                                {"attention.output.dense.", "self_attention.out_proj."},
                                {"layernorm_after.", "ln_2."},
                                {"intermediate.dense.", "mlp.0."},
                                {"output.dense.", "mlp.3."}};
    return rename(key, "encoder.layer.", layer, top);
}

// Stacks "<layer>qkv.{q,k,v}.{weight,bias}" into "<layer>self_attention.in_proj_{weight,bias}" (rows q, then k, v).
void stack_qkv(std::map<std::string, Tensor>& state, const std::string& source) {
    std::set<std::string> groups;   // "<layer>qkv." prefixes with their suffix
    for (const auto& [key, t] : state) {
        // only from_huggingface's "qkv.<q|k|v>.<what>" (timm's "attn.qkv.weight" is already packed)
        const size_t at = key.find("qkv.");
        if (at != std::string::npos && key.size() > at + 6 && key[at + 5] == '.' &&
            (key[at + 4] == 'q' || key[at + 4] == 'k' || key[at + 4] == 'v'))
            groups.insert(key.substr(0, at) + "|" + key.substr(at + 6));
    }
    for (const std::string& g : groups) {
        const std::string layer = g.substr(0, g.find('|')), what = g.substr(g.find('|') + 1);   // what: weight, bias
        std::vector<Tensor> parts;
        for (const char* p : {"q", "k", "v"}) {
            auto it = state.find(layer + "qkv." + p + "." + what);
            if (it == state.end())
                throw Error(fmt(source, ": attention ", what, " of ", layer, " has no ", p, " part (Hugging Face's "
                                "query, key, value must all be present); hint: the file is incomplete"));
            parts.push_back(it->second);
            state.erase(it);
        }
        if (parts[0].shape() != parts[1].shape() || parts[0].shape() != parts[2].shape())
            throw Error(fmt(source, ": the query, key and value ", what, "s of ", layer, " differ in shape (",
                            shape_str(parts[0].shape()), ", ", shape_str(parts[1].shape()), ", ",
                            shape_str(parts[2].shape()), "); hint: the file is corrupt"));
        NoGradGuard no_grad;
        state[layer + "self_attention.in_proj_" + what] = concat(parts, 0).contiguous();
    }
}

std::map<std::string, Tensor> renamed(const std::map<std::string, Tensor>& state, std::string (*rule)(std::string)) {
    std::map<std::string, Tensor> out;
    for (const auto& [key, t] : state) out[rule(key)] = t;
    return out;
}

size_t coverage(const std::map<std::string, Tensor>& state, const std::vector<std::string>& expected) {
    size_t n = 0;
    for (const auto& key : expected) n += state.count(key);
    return n;
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = up;
        }
    }
    return row[b.size()];
}

}  // namespace

std::string nearest_key(const std::string& key, const std::vector<std::string>& expected) {
    std::string best;
    size_t best_distance = SIZE_MAX;
    for (const auto& e : expected)
        if (const size_t d = edit_distance(key, e); d < best_distance) best_distance = d, best = e;
    return best;
}

RenamedState to_model_keys(const std::map<std::string, Tensor>& state_in, const nn::Module& model,
                           const std::string& source) {
    std::map<std::string, Tensor> state = state_in;
    const bool data_parallel =
        !state.empty() && std::all_of(state.begin(), state.end(), [](const auto& kv) { return starts_with(kv.first, "module."); });
    if (data_parallel) state = renamed(state, [](std::string k) { return k.substr(7); });

    std::vector<std::string> expected;
    for (const auto& [key, t] : model.state_dict()) expected.push_back(key);
    RenamedState best{"torchvision", state};
    size_t best_coverage = coverage(state, expected);
    const std::pair<const char*, std::string (*)(std::string)> dialects[] = {
        {"timm", from_timm}, {"huggingface", from_huggingface}};
    for (const auto& [name, rule] : dialects) {
        if (best_coverage == expected.size()) break;
        std::map<std::string, Tensor> candidate = renamed(state, rule);
        if (std::string(name) == "huggingface") stack_qkv(candidate, source);
        if (const size_t c = coverage(candidate, expected); c > best_coverage)
            best = RenamedState{name, std::move(candidate)}, best_coverage = c;
    }
    if (2 * best_coverage < expected.size()) {
        std::string unmatched;
        int shown = 0;
        for (const auto& [key, t] : state) {
            if (std::find(expected.begin(), expected.end(), key) != expected.end()) continue;
            if (shown++ == 5) break;
            unmatched += fmt("\n  '", key, "' (nearest expected: '", nearest_key(key, expected), "')");
        }
        throw Error(fmt(source, ": its keys match ", best_coverage, " of the model's ", expected.size(),
                        " in every dialect razor knows (torchvision, timm, Hugging Face); first unmatched keys:",
                        unmatched, "\nhint: check --model (razor info --checkpoint FILE names the model it matches)"));
    }
    return best;
}

}  // namespace razor::models
