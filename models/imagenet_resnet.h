// models/imagenet_resnet.h -- torchvision's ImageNet ResNets (He et al., 2016): resnet18, resnet34, resnet50.
//
// Dimension letters: N batch, C channels, H W spatial (S x S input; any S the strides allow, 224 for ImageNet).
//
//     conv1 7x7 stride 2 pad 3, C->64, bn1, ReLU                 (N, 64, S/2, S/2)
//     maxpool 3x3 stride 2 pad 1                                 (N, 64, S/4, S/4)
//     layer1: blocks at planes 64, stride 1                      (N, 64 e, S/4, S/4)      e = expansion: 1 or 4
//     layer2: blocks at planes 128, the first with stride 2      (N, 128 e, S/8, S/8)
//     layer3: planes 256, stride 2                               (N, 256 e, S/16, S/16)
//     layer4: planes 512, stride 2                               (N, 512 e, S/32, S/32)
//     avgpool (adaptive, 1x1), flatten, fc Linear(512 e -> classes)
//
// BasicBlock (resnet18 [2,2,2,2], resnet34 [3,4,6,3]; e = 1):
//     relu(bn2(conv2(relu(bn1(conv1(x))))) + identity)          conv1 3x3 stride s, conv2 3x3
// Bottleneck (resnet50 [3,4,6,3]; e = 4), torchvision's "v1.5": the stride sits on the 3x3, not the first 1x1:
//     relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + identity)   conv1 1x1, conv2 3x3 stride s, conv3 1x1
// identity = downsample(x) = bn(conv1x1 stride s (x)) (keys downsample.0, downsample.1) where the stride or the
// width changes, else x. Every conv is bias-free.
// Parameters (1000 classes): resnet18 11,689,512; resnet34 21,797,672; resnet50 25,557,032.
//
// reference: torchvision.models.resnet (ResNet, BasicBlock, Bottleneck), torchvision 0.14: module and state-dict
// key names are torchvision's (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, fc, ...), so its published
// weights load as they are. Init as torchvision: kaiming_normal_(fan_out, ReLU gain) on every conv, BN weight 1 and
// bias 0, fc with PyTorch's Linear default; zero_init_residual sets the last BN weight of every block to 0.
// docs: docs/models.md "Architectures".
#pragma once

#include <array>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/sequential.h"

namespace razor::models {

enum class ResNetBlock { Basic, Bottleneck };

struct ImageNetResNetConfig {
    ResNetBlock block = ResNetBlock::Basic;
    std::array<int64_t, 4> layers = {2, 2, 2, 2};          // blocks per stage
    std::array<int64_t, 4> planes = {64, 128, 256, 512};   // torchvision's widths (the tests use narrower ones)
    int64_t in_channels = 3;
    bool zero_init_residual = false;

    static ImageNetResNetConfig resnet18() { return {}; }
    static ImageNetResNetConfig resnet34() { return {.layers = {3, 4, 6, 3}}; }
    static ImageNetResNetConfig resnet50() { return {.block = ResNetBlock::Bottleneck, .layers = {3, 4, 6, 3}}; }
};

// One residual block of either kind; `expansion` = 1 (BasicBlock) or 4 (Bottleneck).
class ImageNetResNetBlock : public nn::Module {
public:
    ImageNetResNetBlock(ResNetBlock kind, int64_t in_channels, int64_t planes, int64_t stride, Generator& gen);
    Tensor forward(const Tensor& x) override;   // (N, in, H, W) -> (N, planes e, H/s, W/s)
    std::string type_name() const override { return kind == ResNetBlock::Basic ? "BasicBlock" : "Bottleneck"; }
    static int64_t expansion(ResNetBlock kind) { return kind == ResNetBlock::Basic ? 1 : 4; }

    ResNetBlock kind;
    std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;     // conv3: Bottleneck only
    std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
    std::shared_ptr<nn::Sequential> downsample;          // null when the identity fits
};

class ImageNetResNet : public nn::Module {
public:
    ImageNetResNet(const ImageNetResNetConfig& config, int64_t num_classes, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // (N, C, S, S) -> (N, classes)
    std::string type_name() const override { return "ResNet"; }

    std::shared_ptr<nn::Conv2d> conv1;
    std::shared_ptr<nn::BatchNorm2d> bn1;
    std::shared_ptr<nn::MaxPool2d> maxpool;
    std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
    std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
    std::shared_ptr<nn::Linear> fc;
    ImageNetResNetConfig config;
};

}  // namespace razor::models
