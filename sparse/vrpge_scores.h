// sparse/vrpge_scores.h -- VR-PGE's structure parameters: one keep probability s per output channel of every masked
// layer, and the per-pass Bernoulli sampler that turns them into channel masks m and kept-index lists.
//
// reference: the official VRPGE code (utils/conv_type.py, the `scores` of each masked conv and its sampler).
// docs: docs/vr-pge.md §1-§2.
//
// Notation as the paper: m is the 0/1 mask, s the keep probabilities (m_c ~ Bernoulli(s_c)); never the other way.
//
// Layout: a ChannelScores is built from the ordered list of layers that produce channels (name, OC, masked). Each
// masked layer owns one f32 parameter tensor "<name>.s" of shape (OC); unmasked layers (the classifier, by an
// explicit flag -- never an out-channel heuristic) own none and count neither in n nor in the budget.
//
// Shared masks (`ScoredLayer::shares`): a layer may use an earlier layer's s and mask instead of its own (same
// channel count). It then owns no parameter, counts neither in n nor in the budget, draws no random numbers, and its
// mask in every pass is its owner's; the estimator sees the owner's Bernoulli variables once. share_stream_masks()
// ties the layers that write one residual stream (--stream-masks, a deviation from the reference; docs/vr-pge.md).
//
// Sampling: one mask per layer per forward pass, shared by the whole minibatch (what makes a compact pass
// possible). m_c = 1[u_c < s_c] with u_c uniform on [0, 1) drawn from a razor Generator, layer by layer in list order,
// channel by channel, so a seed fixes every mask. s = 0 never keeps, s = 1 always keeps (spec §4.6). The sampler is
// not part of the autograd graph: s receives no chain-rule gradient, only the VR-PGE term (vrpge_estimator.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/core.h"

namespace razor::sparse {

// One layer that produces output channels, in network order.
struct ScoredLayer {
    std::string name;       // module path, e.g. "layer1.0.conv1"; the parameter is "<name>.s"
    int64_t channels = 0;   // OC
    bool masked = true;     // false for layers that keep every channel (the classifier head)
    // The layers whose kept output channels make this layer's input channels (their union); empty = the network's
    // input. Informational (FLOP accounting, docs); ChannelScores does not read it.
    std::vector<std::string> inputs = {};
    // The residual stream this layer's output is added into ("layer2"), set by the model; empty for layers that
    // write no stream (block conv1, VGG convs, the classifier).
    std::string stream = {};
    // The earlier layer whose s and mask this layer uses (empty: its own). Set by share_stream_masks().
    std::string shares = {};
};

// --stream-masks (deviation, labelled wherever used): one mask per residual stream. Every masked layer with a
// non-empty `stream` shares the s and mask of the first layer (in list order) that writes the same stream, so a
// stage's stream writers keep the same channels and the stream's active set is that one mask instead of the union
// of independent ones. Throws when no layer writes a stream (VGG), naming the layers' first name.
std::vector<ScoredLayer> share_stream_masks(std::vector<ScoredLayer> layers);

// The masks of one forward pass, aligned with ChannelScores::layers().
struct ChannelMasks {
    std::vector<Tensor> m;      // per layer: (OC) f32 of 0/1; all ones for an unmasked layer
    std::vector<Tensor> kept;   // per layer: (n_kept) i64, the indices with m = 1, ascending (the channel-subset seam)
};

class ChannelScores {
public:
    // Every masked layer's s starts at `init` (the reference uses 0.5; it must lie in [0, 1]). Throws on an empty or
    // duplicate name, channels < 1, or an init outside [0, 1].
    ChannelScores(std::vector<ScoredLayer> layers, float init = 0.5f);

    const std::vector<ScoredLayer>& layers() const { return layers_; }
    // The s tensor of layer i (undefined for an unmasked or sharing layer). A leaf with requires_grad, so it has a .grad().
    const Tensor& s(size_t layer) const { return s_[layer]; }
    // The index of the layer whose s and mask layer i uses: i itself unless it shares.
    size_t owner(size_t layer) const { return owner_[layer]; }
    // Layer i draws its own mask: masked and not sharing another layer's.
    bool owns_mask(size_t layer) const { return layers_[layer].masked && owner_[layer] == layer; }
    // n: prunable channels, the sum of OC over masked layers that own their mask (spec §2 "budget size").
    int64_t num_masked_channels() const { return n_; }
    // K_budget = rho * n, rho the channel KEEP ratio (the reference's misnamed --prune-rate).
    double budget(double rho) const { return rho * static_cast<double>(n_); }

    // ("<name>.s", s) for every masked layer, in layer order: what Adam on s and checkpoints take.
    std::vector<std::pair<std::string, Tensor>> named_parameters() const;
    // The defined s tensors, in layer order (the projection's input).
    std::vector<Tensor> parameters() const;

    // One pass's masks: m ~ Bernoulli(s) per masked channel, from `gen`.
    ChannelMasks sample(Generator& gen) const;

    void zero_grad() const;   // drops every s.grad

private:
    std::vector<ScoredLayer> layers_;
    std::vector<Tensor> s_;   // per layer; undefined when unmasked or sharing
    std::vector<size_t> owner_;
    int64_t n_ = 0;
};

// The sorted list of indices where a (C) f32 0/1 mask is 1, as a (n_kept) i64 tensor.
Tensor kept_indices(const Tensor& m);

// --align: rounds every masked layer's kept count UP to a multiple of `multiple` (or to all its channels) by adding
// the dropped channels with the highest s (ties: the lower index). A count of 0 stays 0. This CHANGES the
// algorithm (spec §11.2 (b)): the applied mask is no longer a Bernoulli sample and the VR-PGE estimator, which must
// then use the mask actually applied (what this returns), is biased. Every number produced with it is labelled.
ChannelMasks align_kept(const ChannelScores& scores, ChannelMasks masks, int64_t multiple);

}  // namespace razor::sparse
