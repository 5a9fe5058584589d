// nn/channel_subset.h -- channel subsets as an nn seam: run a network on a per-forward subset of its channels, as
// VR-PGE's sampled subnetworks need (docs/vr-pge.md "Compact execution").
//
// ChannelTensor       activations that hold only some channels of their full width: x (N, |channels|, ...), channel
//                     i of x is channel channels[i] of the full tensor; every channel not listed is exactly 0.
// ChannelSubsets      the kept OUTPUT channels of modules, keyed by module path ("layer1.0.conv1": the path
//                     current_module_path() reports inside the module's call, so the path of a root model's child).
// ChannelSubsetScope  makes a ChannelSubsets current on this thread for its lifetime (scopes nest; the innermost
//                     wins) and counts the multiply-accumulates the subset-aware modules execute in it.
//
// A module called on a ChannelTensor (Module::operator()(const ChannelTensor&), which runs forward_subset inside the
// module's name scope and save policy and reports to the forward observer, as the plain call does):
//   Conv2d, Linear  look their entry up by their path and compute only the kept outputs O from the input's channels
//                   I: y = op(x_c, W[O][:, I]) (+ b[O]); index_select's backward scatter-adds dW into the full dW.
//                   No entry (or no scope): all outputs. All inputs and all outputs: the plain op, unchanged.
//   BatchNorm2d     normalises the channels it is given, with γ, β and the running statistics of those channels
//                   only (true-sparse; train mode updates the kept channels' statistics and counts the batch).
//   ReLU, MaxPool2d, Sequential: per channel / in order; the channel list passes through.
// A call on a plain Tensor is always the dense op and ignores the scope.
//
// Without a scope every list is "all channels" and every subset-aware call is the plain op: a model written once
// over ChannelTensor runs dense exactly as before and compact under a scope.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"

namespace razor::nn {

// Activations on a channel subset; channels ascending, distinct, x.size(1) == channels.size() (the last dim for
// the (N, features) input of a Linear).
struct ChannelTensor {
    Tensor x;
    std::vector<int64_t> channels;

    static ChannelTensor all(const Tensor& x, int64_t dim = 1);   // every channel of x along dim (0..C-1)
};

// The full-width tensor: x itself when it holds all `width` channels, else x scattered into zeros along `dim`.
Tensor to_dense(const ChannelTensor& x, int64_t width, int64_t dim = 1);

// relu(a + b) over the union of the two channel sets (the residual add of a ResNet block): add_relu when both hold
// the same channels, else add_relu_channels onto the union (one pass, each input read in place). An empty set
// contributes nothing.
ChannelTensor add_relu(const ChannelTensor& a, const ChannelTensor& b);

// 0, 1, ..., n-1, and an (n) i64 tensor of the given values.
std::vector<int64_t> iota_channels(int64_t n);
Tensor index_tensor(const std::vector<int64_t>& idx);

class ChannelSubsets {
public:
    // The module at `path` keeps output channels `channels` (ascending, distinct, >= 0; checked). Replaces an
    // earlier entry of the same path.
    void keep(const std::string& path, std::vector<int64_t> channels);
    const std::vector<int64_t>* find(std::string_view path) const;   // null: the module keeps every channel
    const std::vector<int64_t>& at(const std::string& path) const;   // throws naming the path when absent
    size_t size() const { return kept_.size(); }

private:
    std::map<std::string, std::vector<int64_t>, std::less<>> kept_;
};

// Multiply-accumulates per image that the subset-aware convs and linears executed, and what their dense forms
// execute. ratio() = macs / dense_macs (1 when nothing ran).
struct SubsetCost {
    int64_t macs = 0, dense_macs = 0;
    double ratio() const { return dense_macs ? static_cast<double>(macs) / static_cast<double>(dense_macs) : 1.0; }
};

class ChannelSubsetScope {
public:
    // `subsets` must outlive the scope (a temporary is refused at compile time).
    explicit ChannelSubsetScope(const ChannelSubsets& subsets);
    explicit ChannelSubsetScope(ChannelSubsets&&) = delete;
    ~ChannelSubsetScope();
    ChannelSubsetScope(const ChannelSubsetScope&) = delete;
    ChannelSubsetScope& operator=(const ChannelSubsetScope&) = delete;

    static ChannelSubsetScope* current();   // the innermost scope on this thread, or null
    const ChannelSubsets& subsets() const { return subsets_; }
    const SubsetCost& cost() const { return cost_; }   // summed over every forward in this scope so far
    void count(int64_t macs, int64_t dense_macs) { cost_.macs += macs, cost_.dense_macs += dense_macs; }

private:
    const ChannelSubsets& subsets_;
    SubsetCost cost_;
    ChannelSubsetScope* previous_;
};

// For a module's forward_subset: the kept output channels of the module running now (looked up by
// current_module_path() in the current scope), or null for all of them. Throws naming `module` when an entry
// reaches past `width`.
const std::vector<int64_t>* current_kept_channels(int64_t width, const std::string& module);

// Throws naming `module` unless x holds x.channels.size() channels along `dim`, all below `width` (ascending).
void check_channels(const ChannelTensor& x, int64_t width, int64_t dim, const std::string& module);

}  // namespace razor::nn
