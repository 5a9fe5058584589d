// train/subnet.h -- a channel subnetwork of a ChannelPrunable model (models/channel_plan.h) as razor sparse-train
// uses it: the scope that runs the model on one, choosing the fine-tuned one among candidates drawn from s, and its
// place in the checkpoint.
//
// reference: the official VRPGE code's "finetune" phase (draw subnetworks from the final s, keep the best by
// training accuracy, fine-tune it). docs: docs/vr-pge.md §9-§10.
//
// Every change of a model's channel plan made by the training layer goes through SubnetScope: the VR-PGE passes
// (train/vrpge_trainer.cpp), the sampled-subnet evaluation, the candidate scoring and the fixed-subnet fine-tune.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/loader.h"
#include "models/channel_plan.h"
#include "nn/channel_subset.h"
#include "nn/module.h"
#include "sparse/vrpge_scores.h"
#include "train/run_log.h"

namespace razor::train {

// While it lives, every forward on this thread runs compact on the plan last set (none: dense), through an
// nn::ChannelSubsetScope that owns its plan; dense again when it ends or after reset().
class SubnetScope {
public:
    SubnetScope() = default;
    explicit SubnetScope(models::ChannelPlan plan) { set(std::move(plan)); }
    SubnetScope(const SubnetScope&) = delete;
    SubnetScope& operator=(const SubnetScope&) = delete;
    void set(models::ChannelPlan plan);
    void reset() { scope_.reset(); }
    // MACs executed over dense since the last set() (1 when nothing ran).
    double cost_ratio() const { return scope_ ? scope_->cost().ratio() : 1.0; }

private:
    models::ChannelPlan plan_;
    std::optional<nn::ChannelSubsetScope> scope_;
};

// Draws `candidates` subnetworks from `scores` with `masks`, scores each by its accuracy on `batches` batches of
// `loader` (train-mode BN, no gradient; the running statistics are put back), prints and logs ("B-select") each,
// and returns the best (the first on a tie). `image` (C, H, W) sizes the forward that measures a candidate's MACs.
models::ChannelPlan select_subnetwork(nn::Module& model, const sparse::ChannelScores& scores, data::DataLoader& loader,
                                      int64_t candidates, int64_t batches, Generator& masks, const Shape& image,
                                      RunLog& log);

// A subnetwork in a train state: "PREFIX.counts" (L) i64, the kept channels of each scored layer, and "PREFIX.kept"
// (sum of counts) i64, their indices layer after layer. PREFIX "plan": phase B's chosen subnetwork; "interval":
// phase A's interval mask under --resample-every N > 1. unpack_plan checks both against `layers` and throws naming
// `where` and the entry.
void pack_plan(const models::ChannelPlan& plan, const std::vector<sparse::ScoredLayer>& layers,
               std::map<std::string, Tensor>& state, const std::string& prefix = "plan");
models::ChannelPlan unpack_plan(const std::map<std::string, Tensor>& state, const std::string& where,
                                const std::vector<sparse::ScoredLayer>& layers, const std::string& prefix = "plan");

// s from the "scores.<layer>.s" entries (checked: same shapes as this model's), copied into the leaves Adam updates.
void restore_scores(const sparse::ChannelScores& scores, const std::map<std::string, Tensor>& state,
                    const std::string& where);

// OUT/subnet/model.safetensors: the subnetwork `plan` of `prunable` (the model, put in eval mode) as a physically
// smaller dense model (ChannelPrunable::extract) with `metadata` and its widths; and OUT/subnet/
// model.logits.safetensors: an input drawn from `seed` and the export's eval-mode logits (for
// scripts/check_interop.py, the PyTorch side). `image` is (C, H, W).
struct ExportedSubnet {
    std::shared_ptr<nn::Module> model;
    std::vector<int64_t> widths;
    std::string path;
};
ExportedSubnet export_subnetwork(nn::Module& model, const models::ChannelPrunable& prunable,
                                 const models::ChannelPlan& plan, std::map<std::string, std::string> metadata,
                                 const std::string& out, const Shape& image, int64_t seed);

}  // namespace razor::train
