// models/registry.h -- razor's model zoo by name: make_model("resnet20", 10, gen).
//
// reference: the PyTorch definitions in scripts/fixtures/ops_models.py (one per family); state-dict keys and
// parameter order match them exactly. docs: docs/models.md.
//
// Names (model_names()): mlp, lenet5, resnet20, resnet32, resnet56, resnet32x2, vgg16_bn, vgg19_bn, resnet18,
// resnet34, resnet50 (torchvision's ImageNet ResNets, models/imagenet_resnet.h), mobilenet_v2 (models/mobilenet.h), vit_b_16, vit_s_16 (torchvision's
// ViT layout, models/imagenet_vit.h), vit_tiny.
// Every model takes (N, C, H, W) images and returns (N, num_classes) logits. The defaults are CIFAR's 3x32x32;
// ModelOptions changes the input geometry where the family allows it (lenet5 and mlp on 1x28x28 MNIST-style
// images, vit_tiny's depth).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace razor::models {

struct ModelOptions {
    int64_t in_channels = 3;   // C
    int64_t image_size = 32;   // H = W
    int64_t depth = 0;         // the ViTs: number of transformer blocks (0 = the default, 12); others: must stay 0
    // resnets and vggs: the out-channels of every masked scored layer (models/channel_plan.h), for the physically
    // smaller subnetworks razor sparse-train exports (ChannelPrunable::Extracted::widths); empty = the zoo widths.
    std::vector<int64_t> widths = {};
};

// Throws razor::Error for an unknown name (listing the valid ones), num_classes < 1, or options the family cannot
// build (e.g. vgg on 28x28 images).
std::shared_ptr<nn::Module> make_model(const std::string& name, int64_t num_classes, Generator& gen,
                                       const ModelOptions& options = {});
const std::vector<std::string>& model_names();
// The same names joined by ", " (for usage texts).
std::string model_names_joined();

}  // namespace razor::models
