// sparse/vrpge_scores.cpp -- the structure parameters and the Bernoulli channel sampler. See vrpge_scores.h.
#include "sparse/vrpge_scores.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace razor::sparse {

ChannelScores::ChannelScores(std::vector<ScoredLayer> layers, float init) : layers_(std::move(layers)) {
    if (!(init >= 0.f && init <= 1.f))
        throw Error(fmt("ChannelScores: expected init in [0, 1], got ", init,
                        "; hint: s are keep probabilities, the reference starts them at 0.5"));
    std::map<std::string, size_t> seen;   // name -> index
    for (const ScoredLayer& l : layers_) {
        if (l.name.empty())
            throw Error("ChannelScores: got a layer with an empty name; hint: use the module path, e.g. layer1.0.conv1");
        if (!seen.emplace(l.name, owner_.size()).second)
            throw Error(fmt("ChannelScores: layer '", l.name, "' appears twice; hint: one entry per conv"));
        if (l.channels < 1)
            throw Error(fmt("ChannelScores: layer '", l.name, "' expected channels >= 1, got ", l.channels));
        owner_.push_back(owner_.size());
        if (!l.shares.empty()) {
            const auto it = seen.find(l.shares);
            if (!l.masked || it == seen.end() || it->second == owner_.back() || !layers_[it->second].masked ||
                !layers_[it->second].shares.empty() || layers_[it->second].channels != l.channels)
                throw Error(fmt("ChannelScores: layer '", l.name, "' shares the mask of '", l.shares,
                                "', expected an earlier masked layer with its own mask and ", l.channels,
                                " channels; hint: share_stream_masks() sets this from the model's streams"));
            owner_.back() = it->second;
            s_.emplace_back();   // the owner's s is the parameter
            continue;
        }
        if (!l.masked) {
            s_.emplace_back();   // unmasked layers own no s (spec §3)
            continue;
        }
        Tensor s = Tensor::full({l.channels}, init);
        s.set_name(l.name + ".s");
        s.requires_grad_(true);
        s_.push_back(s);
        n_ += l.channels;
    }
}

std::vector<std::pair<std::string, Tensor>> ChannelScores::named_parameters() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (size_t i = 0; i < layers_.size(); ++i)
        if (owns_mask(i)) out.emplace_back(layers_[i].name + ".s", s_[i]);
    return out;
}

std::vector<Tensor> ChannelScores::parameters() const {
    std::vector<Tensor> out;
    for (const Tensor& s : s_)
        if (s.defined()) out.push_back(s);
    return out;
}

ChannelMasks ChannelScores::sample(Generator& gen) const {
    ChannelMasks out;
    out.m.reserve(layers_.size());
    out.kept.reserve(layers_.size());
    for (size_t i = 0; i < layers_.size(); ++i) {
        if (owner_[i] != i) {   // a shared mask: the owner's (drawn earlier in this loop), no random numbers
            out.kept.push_back(out.kept[owner_[i]]);
            out.m.push_back(out.m[owner_[i]]);
            continue;
        }
        const int64_t C = layers_[i].channels;
        Tensor m = Tensor::ones({C});   // (OC)
        if (layers_[i].masked) {
            const Tensor s = s_[i].contiguous();
            const float* sp = s.data<float>();
            float* mp = m.data<float>();
            // u < s: strict, so s = 0 never keeps and s = 1 (u < 1 always) always keeps -- the reference's rule.
            for (int64_t c = 0; c < C; ++c) mp[c] = gen.uniform() < sp[c] ? 1.f : 0.f;
        }
        out.kept.push_back(kept_indices(m));
        out.m.push_back(std::move(m));
    }
    return out;
}

void ChannelScores::zero_grad() const {
    for (const Tensor& s : s_)
        if (s.defined()) s.zero_grad();
}

Tensor kept_indices(const Tensor& m) {
    if (m.dim() != 1 || m.dtype() != DType::F32)
        throw Error(fmt("kept_indices: expected a (C) f32 0/1 mask, got ", shape_str(m.shape()),
                        m.dtype() == DType::F32 ? "" : " of another dtype"));
    const Tensor mc = m.contiguous();
    const float* mp = mc.data<float>();
    std::vector<int64_t> idx;
    for (int64_t c = 0; c < mc.numel(); ++c)
        if (mp[c] != 0.f) idx.push_back(c);
    const auto n = static_cast<int64_t>(idx.size());
    return Tensor::from_vector_i64({n}, idx);
}

ChannelMasks align_kept(const ChannelScores& scores, ChannelMasks masks, int64_t multiple) {
    if (multiple < 1) throw Error(fmt("align_kept: expected multiple >= 1, got ", multiple));
    const auto& layers = scores.layers();
    if (masks.m.size() != layers.size())
        throw Error(fmt("align_kept: expected ", layers.size(), " masks, got ", masks.m.size()));
    for (size_t i = 0; i < layers.size(); ++i) {
        if (scores.owner(i) != i) {   // a shared mask: the owner's aligned mask (the owner comes first)
            masks.m[i] = masks.m[scores.owner(i)];
            masks.kept[i] = masks.kept[scores.owner(i)];
            continue;
        }
        if (!layers[i].masked) continue;
        const int64_t C = layers[i].channels;
        masks.m[i] = masks.m[i].contiguous().clone();   // the caller's mask tensor stays as it was
        float* mp = masks.m[i].data<float>();
        int64_t kept = 0;
        for (int64_t c = 0; c < C; ++c) kept += mp[c] != 0.f;
        const int64_t target = std::min(C, (kept + multiple - 1) / multiple * multiple);
        if (target == kept) continue;
        const Tensor s = scores.s(i).contiguous();
        const float* sp = s.data<float>();
        std::vector<int64_t> dropped;
        for (int64_t c = 0; c < C; ++c)
            if (mp[c] == 0.f) dropped.push_back(c);
        std::stable_sort(dropped.begin(), dropped.end(), [&](int64_t a, int64_t b) { return sp[a] > sp[b]; });
        for (int64_t j = 0; j < target - kept; ++j) mp[dropped[j]] = 1.f;
        masks.kept[i] = kept_indices(masks.m[i]);
    }
    return masks;
}

std::vector<ScoredLayer> share_stream_masks(std::vector<ScoredLayer> layers) {
    std::map<std::string, std::string> first;   // stream -> the first masked layer writing it
    for (ScoredLayer& l : layers) {
        if (!l.masked || l.stream.empty()) continue;
        const auto [it, inserted] = first.emplace(l.stream, l.name);
        if (!inserted) l.shares = it->second;
    }
    if (first.empty())
        throw Error(fmt("--stream-masks: no layer of this model writes a residual stream (first layer '",
                        layers.empty() ? std::string("?") : layers.front().name,
                        "'); hint: one mask per stream exists for the CIFAR ResNets; VGGs have no residual stream"));
    return layers;
}

}  // namespace razor::sparse
