// models/resnet.h -- CIFAR ResNets (He et al., 2016, §4.2): resnet20/32/56 and the wide resnet32x2.
//
// Dimension letters: N batch, C channels, H W spatial.
//
//     conv1 3x3 3->w0, bn1, ReLU                                         (N, w0, 32, 32)
//     layer1: n BasicBlocks at w0, stride 1                               (N, w0, 32, 32)
//     layer2: n BasicBlocks at w1, the first with stride 2                (N, w1, 16, 16)
//     layer3: n BasicBlocks at w2, the first with stride 2                (N, w2, 8, 8)
//     global average pool, linear w2->classes                             (N, classes)
//
// BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); convs 3x3, bias-free.
// Shortcuts where the shape changes (the first block of layer2 and layer3):
//   option A (resnet20/32/56, He et al.'s CIFAR models): x[:, :, ::2, ::2] zero-padded with (out - in)/2 channels
//            on each side; no parameters. Counts (10 classes): 269,722 / 464,154 / 853,018.
//   option B (resnet32x2): a 1x1 conv with stride 2 + BN, as the child Sequential `shortcut` (keys
//            shortcut.0.weight, shortcut.1.*). Widths 32/64/128, 5 blocks per stage: 1,860,522 parameters.
//            (The VR-PGE reference ends in a bias-free 1x1 conv instead of the Linear: 10 parameters fewer,
//            the same function; see docs/models.md.)
//
// reference: the PyTorch definition in scripts/fixtures/ops_models.py, which follows the common CIFAR recipe
// (akamaster/pytorch_resnet_cifar10): keys conv1.weight, bn1.*, layer1.0.conv1.weight, layer1.0.bn1.*, ...,
// linear.weight, linear.bias. Init as that recipe: kaiming_normal_ (fan_in, ReLU gain: N(0, 2 / fan_in)) on every
// conv and on the Linear weight; the Linear bias keeps PyTorch's default U(-1/sqrt(in), +); BN weight 1, bias 0.
// docs: docs/models.md.
//
// Compact channel execution (VR-PGE, models/channel_plan.h): scored layers are conv1, then per block conv1, conv2 and
// the projection shortcut's conv (shortcut.0), then linear (unmasked). The one forward is subset-aware: under an
// nn::ChannelSubsetScope every conv runs on its kept channels and the residual stream stays compact over the union
// of the channels written into it; without one it is the plain dense network.
// extract(plan): a CifarResNet with the same blocks whose block-internal widths (conv1 out, conv2 in) are |O| and,
// for option B, whose stage widths are the stream's union U_s (stem, conv2 and shortcut rows of U_s that their own
// plan drops are zero filters with BN gamma = beta = 0, so they output exactly 0 in eval mode). Option A keeps the
// stage widths (its zero-pad shortcut fixes the channel layout) with the same zero rows.
#pragma once

#include <array>

#include "models/channel_plan.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/sequential.h"

namespace razor::models {

enum class Shortcut { A, B };   // A: subsample + zero-pad channels (no parameters); B: 1x1 conv + BN

// Option A: y = x[:, :, ::s, ::s] with (out - in) / 2 zero channels before and after. No parameters, no tape.
class PadShortcut : public nn::Module {
public:
    PadShortcut(int64_t in_channels, int64_t out_channels, int64_t stride);
    Tensor forward(const Tensor& x) override;   // (N, in, H, W) -> (N, out, H/s, W/s)
    // On a channel subset: the subsampled channels, their indices moved up by the pad (the pad channels are 0, so
    // they are not in the set); the plain forward when x holds every channel.
    nn::ChannelTensor forward_subset(const nn::ChannelTensor& x) override;
    std::string type_name() const override { return "PadShortcut"; }

    int64_t in_channels, out_channels, stride;
};

class BasicBlock : public nn::Module {
public:
    // mid_channels: conv1's outputs (0 = out_channels; a narrower block from CifarResNet::extract).
    BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride, Shortcut shortcut, Generator& gen,
               int64_t mid_channels = 0);
    Tensor forward(const Tensor& x) override;   // (N, in, H, W) -> (N, out, H/stride, W/stride), dense
    // The block (subset-aware): relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the add over the union of the
    // two channel sets.
    nn::ChannelTensor forward_subset(const nn::ChannelTensor& x) override;
    nn::Conv2d* shortcut_conv() const;      // the projection shortcut's conv, or null
    nn::BatchNorm2d* shortcut_bn() const;
    std::string type_name() const override { return "BasicBlock"; }

    std::shared_ptr<nn::Conv2d> conv1, conv2;
    std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
    std::shared_ptr<nn::Module> shortcut;   // null for the identity
};

class CifarResNet : public nn::Module, public ChannelPrunable {
public:
    // blocks_per_stage n (depth 6n + 2), stage widths, shortcut option. mid_widths: conv1 outputs of every block in
    // order (empty = the stage widths).
    CifarResNet(int64_t blocks_per_stage, std::array<int64_t, 3> widths, Shortcut shortcut, int64_t in_channels,
                int64_t num_classes, Generator& gen = default_generator(), std::vector<int64_t> mid_widths = {});
    // The same from the out-channels of every masked scored layer (ModelOptions::widths, Extracted::widths):
    // stem, then per block conv1, conv2 [, shortcut conv]. Throws when they do not describe such a network.
    static std::shared_ptr<CifarResNet> from_widths(int64_t blocks_per_stage, Shortcut shortcut, int64_t in_channels,
                                                    int64_t num_classes, const std::vector<int64_t>& widths,
                                                    Generator& gen);
    Tensor forward(const Tensor& x) override;   // (N, C, H, W) -> (N, classes); compact under a ChannelSubsetScope
    std::string type_name() const override { return "CifarResNet"; }

    std::vector<sparse::ScoredLayer> scored_layers() const override;
    Extracted extract(const ChannelPlan& plan) const override;

    std::shared_ptr<nn::Conv2d> conv1;
    std::shared_ptr<nn::BatchNorm2d> bn1;
    std::shared_ptr<nn::Sequential> layer1, layer2, layer3;
    std::shared_ptr<nn::Linear> linear;
    int64_t blocks_per_stage;
    Shortcut shortcut_kind;

private:
    std::vector<BasicBlock*> blocks() const;
    std::string block_path(size_t i) const;   // "layer<s>.<b>." of the i-th block
};

}  // namespace razor::models
