// models/mobilenet.h -- torchvision's MobileNetV2 (Sandler et al., 2018): inverted residuals with linear bottlenecks.
//
// Dimension letters: N batch, C channels, H W spatial (S x S input; 224 for ImageNet weights).
//
//     features.0: conv 3x3 stride 2, 3->32, BN, ReLU6                          (N, 32, S/2, S/2)
//     features.1..17: InvertedResidual blocks, settings (t, c, n, s) =
//         (1, 16, 1, 1) (6, 24, 2, 2) (6, 32, 3, 2) (6, 64, 4, 2) (6, 96, 3, 1) (6, 160, 3, 2) (6, 320, 1, 1)
//         t expansion, c out-channels, n blocks (the first with stride s)       (N, 320, S/32, S/32)
//     features.18: conv 1x1 320->1280, BN, ReLU6                              (N, 1280, S/32, S/32)
//     adaptive average pool to 1x1, flatten, classifier = [Dropout(0.2), Linear(1280, classes)]
//
// InvertedResidual(in, out, stride, t), hidden = round(in t):
//     conv = [conv 1x1 in->hidden, BN, ReLU6]   (only when t != 1: keys conv.0.0, conv.0.1)
//            [conv 3x3 depthwise (groups = hidden) stride s, BN, ReLU6]
//            conv 1x1 hidden->out, BN                        (linear: no activation)
//     y = x + conv(x) when stride 1 and in == out, else conv(x)
// Every conv is bias-free. width_mult scales every width, rounded to a multiple of 8 (torchvision's _make_divisible);
// 3,504,872 parameters at width 1.0 and 1000 classes (torchvision's).
//
// reference: torchvision.models.mobilenetv2 (MobileNetV2, InvertedResidual, Conv2dNormActivation), torchvision 0.14:
// module and key names are torchvision's (features.0.0, features.1.conv.0.0, features.2.conv.1.1, classifier.1).
// Init as torchvision: conv kaiming_normal_(fan_out), BN 1/0, Linear N(0, 0.01^2) with zero bias. docs:
// docs/models.md "Architectures".
#pragma once

#include "nn/sequential.h"

namespace razor::models {

struct MobileNetV2Config {
    double width_mult = 1.0;
    int64_t in_channels = 3;
    float dropout = 0.2f;   // the classifier's (0 in the parity tests: train-mode masks are random)
};

class InvertedResidual : public nn::Module {
public:
    InvertedResidual(int64_t in_channels, int64_t out_channels, int64_t stride, int64_t expand_ratio, Generator& gen);
    Tensor forward(const Tensor& x) override;   // (N, in, H, W) -> (N, out, H/s, W/s)
    std::string type_name() const override { return "InvertedResidual"; }

    std::shared_ptr<nn::Sequential> conv;
    bool use_res_connect;
};

class MobileNetV2 : public nn::Module {
public:
    MobileNetV2(const MobileNetV2Config& config, int64_t num_classes, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // (N, C, S, S) -> (N, classes)
    std::string type_name() const override { return "MobileNetV2"; }

    std::shared_ptr<nn::Sequential> features, classifier;
    MobileNetV2Config config;
};

// torchvision's _make_divisible: v rounded to the nearest multiple of `divisor` (at least divisor), never more than
// 10 % below v.
int64_t make_divisible(double v, int64_t divisor = 8);

}  // namespace razor::models
