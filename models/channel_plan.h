// models/channel_plan.h -- compact channel execution of the CIFAR ResNets and VGGs: VR-PGE's sampled subnetworks
// (docs/vr-pge.md "Compact execution").
//
// A ChannelPlan is an nn::ChannelSubsets: for every scored layer (ChannelPrunable::scored_layers(), named by module
// path) the kept output channels O_l, sorted. Made current with an nn::ChannelSubsetScope, it makes the model's one
// forward run compact:
//
//     const models::ChannelPlan plan = models::ChannelPlan::from_masks(model.scored_layers(), masks);
//     nn::ChannelSubsetScope compact(plan);      // until the end of the block
//     Tensor logits = model(x);                  // compact; compact.cost() holds its MACs
//
// Inside, the model's activations are nn::ChannelTensor (a tensor plus the channels it holds) and every conv runs
// y_c = conv(x_c, W[O][:, I]) on its input's channels I; BatchNorm2d is true-sparse on the kept channels
// (nn/batchnorm.h); ReLU and pooling run on the compact tensors (nn/channel_subset.h).
//
// Residual stream (ResNets): kept COMPACT over its active set A, the union of the channels written into it so far
// (the stem's O, every conv2's O, the projection shortcut's O; option-A shortcuts shift A by their zero pad). The
// residual add of a branch with channels O forms A ∪ O (nn::add_relu: one scatter-add when O ⊆ A). Channels
// outside A are exactly 0 in the dense network with zeroed channels, so a conv reading the stream gathers
// W[O][:, A] and never touches the activations' dropped channels; once A is every channel this is the plain add.
// The classifier (unmasked) reads the pooled compact features through W[:, A].
//
// Exactness: the compact forward and every gradient equal the dense network whose BN outputs are multiplied by the
// 0/1 mask of their conv (tests/models/test_channel_plan.cpp), up to float summation order. Without a scope (or
// with a plan that keeps every channel) the same forward is the plain dense network, bit for bit.
#pragma once

#include <memory>
#include <vector>

#include "nn/channel_subset.h"
#include "nn/module.h"
#include "sparse/vrpge_scores.h"

namespace razor::models {

// The kept output channels of scored layers, keyed by module path (the layer names of scored_layers()).
struct ChannelPlan : nn::ChannelSubsets {
    // masks.kept as index lists; masks aligned with `layers` (ChannelScores::layers(), i.e. scored_layers()).
    static ChannelPlan from_masks(const std::vector<sparse::ScoredLayer>& layers, const sparse::ChannelMasks& masks);
    static ChannelPlan dense(const std::vector<sparse::ScoredLayer>& layers);   // every channel of every layer
};

// A model that can run compact (the CIFAR ResNets and VGGs): its forward is subset-aware (above).
class ChannelPrunable {
public:
    virtual ~ChannelPrunable() = default;
    // Every conv in forward order (first conv and 1x1 projection shortcuts included, masked) and last the
    // classifier (masked = false, an explicit flag). Names are module paths: the keys of a ChannelPlan.
    virtual std::vector<sparse::ScoredLayer> scored_layers() const = 0;

    // A physically smaller dense model that computes, in eval mode, exactly what this model computes compact with
    // `plan` (same weights, BN running statistics), and `widths`: the out-channels of every masked scored layer in
    // the new model, in order -- models::ModelOptions::widths rebuilds it from the zoo name. Every scored layer
    // needs an entry in `plan`. Details per family in resnet.h / vgg.h.
    struct Extracted {
        std::shared_ptr<nn::Module> model;
        std::vector<int64_t> widths;
    };
    virtual Extracted extract(const ChannelPlan& plan) const = 0;
};

// The model as ChannelPrunable; throws razor::Error naming the model type for the others (mlp, lenet5, vit_tiny).
ChannelPrunable& channel_prunable(nn::Module& model);

}  // namespace razor::models
