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
#pragma once

#include <array>

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
    std::string type_name() const override { return "PadShortcut"; }

    int64_t in_channels, out_channels, stride;
};

class BasicBlock : public nn::Module {
public:
    BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride, Shortcut shortcut, Generator& gen);
    Tensor forward(const Tensor& x) override;   // (N, in, H, W) -> (N, out, H/stride, W/stride)
    std::string type_name() const override { return "BasicBlock"; }

    std::shared_ptr<nn::Conv2d> conv1, conv2;
    std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
    std::shared_ptr<nn::Module> shortcut;   // null for the identity
};

class CifarResNet : public nn::Module {
public:
    // blocks_per_stage n (depth 6n + 2), stage widths, shortcut option.
    CifarResNet(int64_t blocks_per_stage, std::array<int64_t, 3> widths, Shortcut shortcut, int64_t in_channels,
                int64_t num_classes, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // (N, C, H, W) -> (N, classes)
    std::string type_name() const override { return "CifarResNet"; }

    std::shared_ptr<nn::Conv2d> conv1;
    std::shared_ptr<nn::BatchNorm2d> bn1;
    std::shared_ptr<nn::Sequential> layer1, layer2, layer3;
    std::shared_ptr<nn::Linear> linear;
};

}  // namespace razor::models
