// models/vgg.h -- VGG-16/19 with BatchNorm for CIFAR (Simonyan & Zisserman, 2015, configurations D and E).
//
// Dimension letters: N batch, C channels, H W spatial.
//
//     features: per entry of the configuration, conv3x3 (padding 1, bias-free) + BN + ReLU, or a 2x2 max-pool "M"
//       vgg16_bn  64 64 M 128 128 M 256x3 M 512x3 M 512x3 M      13 convs
//       vgg19_bn  64 64 M 128 128 M 256x4 M 512x4 M 512x4 M      16 convs
//     five pools take 32x32 to 1x1 -> flatten (N, 512) -> classifier Linear(512, classes)
//
// reference: class VGG in scripts/fixtures/ops_models.py (the CIFAR form of kuangliu/pytorch-cifar; convs
// bias-free because BN follows, as docs/vr-pge.md §9.2). Keys: features.<i>.weight for conv i, features.<i+1>.*
// for its BN (ReLU and pool entries hold none), classifier.weight, classifier.bias. Init as torchvision's VGG:
// conv kaiming_normal_(fan_out, ReLU gain), BN weight 1 bias 0, Linear N(0, 0.01) and bias 0.
// Parameters (10 classes): vgg16_bn 14,724,042, vgg19_bn 20,035,018.
//
// Compact channel execution (VR-PGE, models/channel_plan.h): scored layers are the convs features.<i> in order, then
// the classifier (unmasked). The one forward is subset-aware, a plain chain: under an nn::ChannelSubsetScope each
// conv reads exactly its predecessor's kept channels; without one it is the plain dense network.
// extract(plan): the VGG whose conv i has |O_i| channels (the classifier reads the last conv's kept channels).
#pragma once

#include <vector>

#include "models/channel_plan.h"
#include "nn/linear.h"
#include "nn/sequential.h"

namespace razor::models {

class VGG : public nn::Module, public ChannelPrunable {
public:
    // config: output channels of each conv, 0 for a max-pool. Inputs must be 32x32 (five pools down to 1x1).
    VGG(const std::vector<int64_t>& config, int64_t in_channels, int64_t num_classes,
        Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // (N, C, 32, 32) -> (N, classes); compact under a ChannelSubsetScope
    std::string type_name() const override { return "VGG"; }

    static std::vector<int64_t> config16();
    static std::vector<int64_t> config19();
    // `config` with its conv widths replaced by `widths` (one per conv; ModelOptions::widths). Throws on a count
    // mismatch or a width < 1.
    static std::vector<int64_t> with_widths(const std::vector<int64_t>& config, const std::vector<int64_t>& widths);

    std::vector<sparse::ScoredLayer> scored_layers() const override;
    Extracted extract(const ChannelPlan& plan) const override;

    std::shared_ptr<nn::Sequential> features;
    std::shared_ptr<nn::Linear> classifier;
    std::vector<int64_t> config;
};

}  // namespace razor::models
