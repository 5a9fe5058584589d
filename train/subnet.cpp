// train/subnet.cpp -- see subnet.h.
#include "train/subnet.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/core.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/train_state.h"

namespace razor::train {

void SubnetScope::set(models::ChannelPlan plan) {
    scope_.reset();   // the old scope refers to plan_: end it before plan_ changes
    plan_ = std::move(plan);
    scope_.emplace(plan_);
}

namespace {

// Accuracy of the model (on whatever subnetwork is set) on `batches` batches of `loader`, train-mode BN, no
// gradient; the BN running statistics are put back afterwards (candidate scoring must not change the model).
double train_accuracy(nn::Module& model, data::DataLoader& loader, int64_t batches) {
    std::vector<std::pair<Tensor, Tensor>> saved;   // (buffer, its copy): running statistics, num_batches_tracked
    for (const auto& [k, t] : model.named_buffers()) saved.emplace_back(t, t.clone());
    NoGradGuard no_grad;
    int64_t correct = 0, seen = 0, b = 0;
    for (data::Batch& batch : loader) {
        if (b++ >= batches) break;
        correct += count_correct(model(batch.images), batch.labels);
        seen += batch.labels.size(0);
    }
    for (auto& [t, copy] : saved) {
        t.copy_(copy);
        t.bump_version();
    }
    return seen ? static_cast<double>(correct) / seen : 0;
}

}  // namespace

models::ChannelPlan select_subnetwork(nn::Module& model, const sparse::ChannelScores& scores, data::DataLoader& loader,
                                      int64_t candidates, int64_t batches, Generator& masks, const Shape& image,
                                      RunLog& log) {
    models::ChannelPlan best;
    double best_acc = -1;
    for (int64_t c = 0; c < candidates; ++c) {
        const models::ChannelPlan plan = models::ChannelPlan::from_masks(scores.layers(), scores.sample(masks));
        SubnetScope subnet(plan);
        {
            NoGradGuard no_grad;   // MACs of this candidate: one eval-mode forward (updates nothing)
            model.eval();
            model(Tensor::zeros({1, image[0], image[1], image[2]}));
            model.train();
        }
        const double cost = subnet.cost_ratio();   // of the one eval-mode forward above
        const double acc = train_accuracy(model, loader, batches);
        int64_t kept = 0;
        for (size_t l = 0; l < scores.layers().size(); ++l)   // the Bernoulli variables kept, as n counts them
            if (scores.owns_mask(l)) kept += static_cast<int64_t>(plan.at(scores.layers()[l].name).size());
        std::printf("B candidate %lld/%lld: %lld/%lld channels kept, MACs %.3fx dense, train accuracy %.2f%% (%lld "
                    "batches)\n",
                    static_cast<long long>(c + 1), static_cast<long long>(candidates), static_cast<long long>(kept),
                    static_cast<long long>(scores.num_masked_channels()), cost, 100 * acc,
                    static_cast<long long>(batches));
        log.write({{"phase", "B-select"}, {"candidate", c + 1}, {"kept", kept}, {"flops_ratio", cost},
                   {"train_acc", acc}});
        if (acc > best_acc) best_acc = acc, best = plan;
    }
    return best;
}

void pack_plan(const models::ChannelPlan& plan, const std::vector<sparse::ScoredLayer>& layers,
               std::map<std::string, Tensor>& state, const std::string& prefix) {
    std::vector<int64_t> counts, kept;
    for (const auto& layer : layers) {
        const auto& k = plan.at(layer.name);
        counts.push_back(static_cast<int64_t>(k.size()));
        kept.insert(kept.end(), k.begin(), k.end());
    }
    state[prefix + ".counts"] = Tensor::from_vector_i64({static_cast<int64_t>(counts.size())}, counts);
    state[prefix + ".kept"] = Tensor::from_vector_i64({static_cast<int64_t>(kept.size())}, kept);
}

models::ChannelPlan unpack_plan(const std::map<std::string, Tensor>& state, const std::string& where,
                                const std::vector<sparse::ScoredLayer>& layers, const std::string& prefix) {
    const std::string counts_name = prefix + ".counts", kept_name = prefix + ".kept";
    const Tensor &counts = state_entry(state, counts_name, where), &kept = state_entry(state, kept_name, where);
    const auto hint = "; hint: resume from a folder razor sparse-train wrote, with the same --model";
    if (counts.dtype() != DType::I64 || kept.dtype() != DType::I64 || counts.dim() != 1 || kept.dim() != 1 ||
        counts.numel() != static_cast<int64_t>(layers.size()))
        throw Error(fmt(where, ": entries '", counts_name, "' / '", kept_name, "' must be i64 lists, the first of ",
                        layers.size(), " counts (one per scored layer), got ", dtype_name(counts.dtype()), " ",
                        shape_str(counts.shape()), " / ", dtype_name(kept.dtype()), " ", shape_str(kept.shape()),
                        hint));
    const auto c = counts.to_vector_i64(), k = kept.to_vector_i64();
    models::ChannelPlan plan;
    size_t at = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
        if (c[l] < 0 || c[l] > layers[l].channels || at + static_cast<size_t>(c[l]) > k.size())
            throw Error(fmt(where, ": '", counts_name, "' gives layer ", layers[l].name, " ", c[l],
                            " kept channels; expected 0 to ", layers[l].channels, " within the ", k.size(),
                            " indices of '", kept_name, "'", hint));
        const std::vector<int64_t> kl(k.begin() + static_cast<std::ptrdiff_t>(at),
                                      k.begin() + static_cast<std::ptrdiff_t>(at + c[l]));
        at += static_cast<size_t>(c[l]);
        for (size_t i = 0; i < kl.size(); ++i)
            if (kl[i] < 0 || kl[i] >= layers[l].channels || (i && kl[i] <= kl[i - 1]))
                throw Error(fmt(where, ": '", kept_name, "' of layer ", layers[l].name,
                                " must be ascending channel indices in [0, ", layers[l].channels, "), got ", kl[i],
                                " at position ", i, hint));
        plan.keep(layers[l].name, kl);
    }
    if (at != k.size())
        throw Error(fmt(where, ": '", kept_name, "' holds ", k.size(), " indices, '", counts_name, "' sums to ", at,
                        hint));
    return plan;
}

// s from the "scores.<layer>.s" entries (same shapes as this model's), copied into the leaves Adam updates.
void restore_scores(const sparse::ChannelScores& scores, const std::map<std::string, Tensor>& state,
                    const std::string& where) {
    NoGradGuard no_grad;
    for (const auto& [name, s] : scores.named_parameters()) {
        const Tensor& v = state_entry(state, "scores." + name, where);
        if (v.dtype() != DType::F32 || v.shape() != s.shape())
            throw Error(fmt(where, ": entry 'scores.", name, "' must be f32 ", shape_str(s.shape()), ", got ",
                            dtype_name(v.dtype()), " ", shape_str(v.shape()),
                            "; hint: resume from a folder razor sparse-train wrote, with the same --model"));
        s.detach().copy_(v);
        s.bump_version();
    }
}

ExportedSubnet export_subnetwork(nn::Module& model, const models::ChannelPrunable& prunable,
                                 const models::ChannelPlan& plan, std::map<std::string, std::string> metadata,
                                 const std::string& out, const Shape& image, int64_t seed) {
    model.eval();
    auto sub = prunable.extract(plan);
    std::string widths;
    for (int64_t w : sub.widths) {
        if (!widths.empty()) widths += ',';
        widths += fmt(w);
    }
    metadata["widths"] = widths;
    metadata["bn_semantics"] = "true-sparse";
    const std::filesystem::path dir = std::filesystem::path(out) / "subnet";
    std::filesystem::create_directories(dir);
    ExportedSubnet e{sub.model, sub.widths, (dir / kModelFile).string()};
    save_safetensors(e.path, e.model->state_dict(), metadata);
    NoGradGuard no_grad;
    Generator io_gen(static_cast<uint64_t>(seed) + 21);
    const Tensor x = Tensor::randn({4, image[0], image[1], image[2]}, io_gen);
    save_safetensors((dir / "model.logits.safetensors").string(), {{"input", x}, {"logits", (*e.model)(x)}});
    return e;
}

}  // namespace razor::train
