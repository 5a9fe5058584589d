// data/preprocess.h -- a model's input pipeline in one value: resolution, eval crop_pct, interpolation and
// normalisation, and the train / eval transforms built from it. Stored in checkpoint metadata, so that razor eval
// and razor predict feed a model exactly what it was trained on.
//
// reference: torchvision's ImageNet recipe and timm's create_transform:
//   train  RandomResizedCrop(size) + RandomHorizontalFlip + ToTensor + Normalize(mean, std)      (augment rrc+flip)
//          or, for images that already have the training size (CIFAR), RandomCrop(size, padding=4) + flip
//   eval   Resize(floor(size / crop_pct)) + CenterCrop(size) + ToTensor + Normalize(mean, std)
// docs: docs/data.md "Preprocessing".
//
// Every resize is antialiased (data/resize_aa.h); geometric steps run on the u8 image, as torchvision's tensor
// transforms do on uint8, and ToFloat + Normalize come last.
#pragma once

#include <string>
#include <vector>

#include "data/resize_aa.h"
#include "data/transforms.h"

namespace razor::data {

// How training images are augmented.
enum class Augment {
    CropFlip,          // "crop+flip": to size (shorter side, centre), pad 4, random size x size crop, flip
    ResizedCropFlip,   // "rrc+flip": RandomResizedCrop(size, scale (0.08, 1), ratio (3/4, 4/3)) + flip
    None,              // "none": the eval transform
};
// Parses "crop+flip" | "rrc+flip" | "none"; throws naming `what`.
Augment parse_augment(const std::string& name, const std::string& what);
std::string augment_name(Augment a);

struct Preprocess {
    int64_t image_size = 224;                          // the model's input is image_size x image_size
    double crop_pct = 0.875;                           // eval: shorter side resized to floor(image_size / crop_pct)
    Interpolation interpolation = Interpolation::Bilinear;
    std::vector<float> mean, std;                      // Normalize, per channel, of pixel / 255
};

// u8 (C, H, W) of any size -> f32 (C, image_size, image_size), normalised.
TransformPtr train_transform(const Preprocess& p, Augment augment);
TransformPtr eval_transform(const Preprocess& p);

}  // namespace razor::data
