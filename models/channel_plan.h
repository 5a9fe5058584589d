// models/channel_plan.h -- compact channel execution: run a CIFAR ResNet or VGG on a per-forward subset of every
// conv's output channels, as VR-PGE's sampled subnetworks need (docs/vr-pge.md §8; spec shared/docs/vr-pge.md
// §10-§11).
//
// A ChannelPlan lists, for every scored layer (ChannelPrunable::scored_layers(), the order of ChannelScores), the
// kept output channels O_l, sorted. With a plan set, the model's forward runs each conv on compact tensors:
//
//   x_c (N, |I|, H, W)   the input restricted to its active channels I (the producer's O, or the residual stream's)
//   W_c = W[O][:, I]     index_select on dims 0 and 1: autograd scatter-adds dW_c into the full dW (zero elsewhere)
//   y_c = conv(x_c, W_c) (N, |O|, OH, OW)
//   BN on the kept channels only: gathered γ[O], β[O], running statistics of O (train-mode updates written back for
//      O only). This is the TRUE-SPARSE semantics (spec §10.1): a dropped channel is absent, contributes exactly 0
//      downstream, and its BN parameters and statistics get nothing. The reference code instead multiplies W by
//      the mask and runs dense BN, where a dropped channel's BN output is β_c and relu(β_c) leaks forward
//      (emulation semantics); razor does not implement the emulation.
//   ReLU and pooling run on the compact tensors.
//
// Residual stream (ResNets): kept COMPACT over its active set A, the union of the channels written into it so far
// (the stem's O, every conv2's O, the projection shortcut's O; option-A shortcuts shift A by their zero pad). A
// residual add of a branch with channels O forms A ∪ O: when O ⊆ A it is one index_add (scatter-add) of the branch
// into the stream; otherwise both are scattered into a zero tensor over A ∪ O. Channels outside A are exactly 0 in
// the dense-with-zeroed-channels network, so a conv reading the stream gathers W[O][:, A] and never touches the
// activations' dropped channels; once A is every channel this is the plain dense add.
//
// The classifier (unmasked) reads the pooled compact features through W[:, A].
//
// Exactness: the compact forward and every gradient equal the dense network whose BN outputs are multiplied by the
// 0/1 mask of their conv (tests/models/test_channel_plan.cpp), up to float summation order.
#pragma once

#include <memory>
#include <vector>

#include "nn/module.h"
#include "sparse/vrpge_scores.h"

namespace razor::nn {
class Conv2d;
class BatchNorm2d;
class Linear;
}  // namespace razor::nn

namespace razor::models {

// The kept output channels of every scored layer for one forward pass, aligned with scored_layers(); each sorted
// ascending, without duplicates. An unmasked layer (the classifier) must keep all of its channels.
struct ChannelPlan {
    std::vector<std::vector<int64_t>> kept;

    static ChannelPlan from_masks(const sparse::ChannelMasks& masks);   // masks.kept as index lists
    static ChannelPlan dense(const std::vector<sparse::ScoredLayer>& layers);
};

// Multiply-accumulates per image of the last forward: what the compact convs and classifier executed, and what the
// dense network executes. ratio() = macs / dense_macs.
struct PlanCost {
    int64_t macs = 0, dense_macs = 0;
    double ratio() const { return dense_macs ? static_cast<double>(macs) / static_cast<double>(dense_macs) : 1.0; }
};

// A model that can run compact (the CIFAR ResNets and VGGs). Dense execution is the default and is unchanged.
class ChannelPrunable {
public:
    virtual ~ChannelPrunable() = default;
    // Every conv in forward order (first conv and 1x1 projection shortcuts included, masked) and last the
    // classifier (masked = false, an explicit flag).
    virtual std::vector<sparse::ScoredLayer> scored_layers() const = 0;
    // Compact execution for the following forwards; nullptr = dense. Checked against scored_layers().
    void set_channel_plan(std::shared_ptr<const ChannelPlan> plan);
    const ChannelPlan* channel_plan() const { return plan_.get(); }
    // MACs of the last forward (compact or dense).
    const PlanCost& last_cost() const { return cost_; }

    // A physically smaller dense model that computes, in eval mode, exactly what this model computes compact with
    // `plan` (same weights, BN running statistics), and `widths`: the out-channels of every masked scored layer in
    // the new model, in order -- models::ModelOptions::widths rebuilds it from the zoo name. Details per family in
    // resnet.h / vgg.h.
    struct Extracted {
        std::shared_ptr<nn::Module> model;
        std::vector<int64_t> widths;
    };
    virtual Extracted extract(const ChannelPlan& plan) const = 0;

protected:
    std::shared_ptr<const ChannelPlan> plan_;
    PlanCost cost_;
};

// The model as ChannelPrunable; throws razor::Error naming the model type for the others (mlp, lenet5, vit_tiny).
ChannelPrunable& channel_prunable(nn::Module& model);

// ---- the compact building blocks (used by resnet.cpp and vgg.cpp) ----

// Activations restricted to a channel subset: x (N, |idx|, ...), channel i of x is channel idx[i] of the full
// width. idx sorted ascending.
struct Compact {
    Tensor x;
    std::vector<int64_t> idx;
};

// Full-width input: idx = 0..C-1.
Compact compact_all(const Tensor& x);
// y = conv(x_c, W[out][:, x.idx]) (+ bias[out]); adds its MACs to `cost`. An empty `out` gives (N, 0, OH, OW); an
// input with no active channel gives zeros (no gradient path), as the dense network's conv of zeros.
Compact compact_conv(const nn::Conv2d& conv, const Compact& x, const std::vector<int64_t>& out, PlanCost& cost);
// BatchNorm2d on the kept channels x.idx only (true-sparse; see above). Bumps num_batches_tracked in training.
Compact compact_batch_norm(nn::BatchNorm2d& bn, const Compact& x);
// compact_relu(compact_batch_norm(bn, x)) as one fused op (batch_norm_relu; same values and saves).
Compact compact_batch_norm_relu(nn::BatchNorm2d& bn, const Compact& x);
Compact compact_relu(const Compact& x);
// a + b over the union of their channel sets (scatter-add; see "Residual stream").
Compact compact_add(const Compact& a, const Compact& b);
// The classifier on pooled compact features x (N, |idx|): x W[:, idx]^T + b; adds its MACs to `cost`.
Tensor compact_linear(const nn::Linear& linear, const Compact& x, PlanCost& cost);

// An (n) i64 tensor of the given values.
Tensor index_tensor(const std::vector<int64_t>& idx);

}  // namespace razor::models
