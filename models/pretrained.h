// models/pretrained.h -- a weights file trained elsewhere (torchvision, timm, Hugging Face) fitted to a zoo model:
// which architecture its keys describe, and its tensors renamed and resized for a model built here.
//
// reference: the key layouts of torchvision's resnet18/34/50, mobilenet_v2 and VisionTransformer, timm's
// VisionTransformer and Hugging Face's ViTModel (models/dialects.h lists the renames). docs: docs/models.md
// "Pretrained weights".
//
// identify_checkpoint reads the architecture off the keys and shapes alone (no model is built): a ResNet by its
// stem, fc and the block count of each stage (basic blocks 2-2-2-2 resnet18, 3-4-6-3 resnet34; bottlenecks 3-4-6-3
// resnet50), MobileNetV2 by its inverted-residual features, a ViT by its class token's width (768 vit_b_16, 384
// vit_s_16), its patch size (16), its block count and its position embedding's grid (the image size it was trained
// at). fit_state then renames the file's keys to the model's (to_model_keys) and, for the ImageNet ViTs, resizes the
// position embedding to the model's patch grid (models/pos_embedding.h) when the image sizes differ.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/module.h"

namespace razor::models {

struct CheckpointArchitecture {
    std::string model;          // a zoo name (resnet18, ..., vit_s_16); empty when the keys name none unambiguously
    std::string dialect;        // "torchvision", "timm" or "huggingface" (the key names)
    int64_t depth = 0;          // ViTs: transformer blocks in the file; 0 for the CNNs
    int64_t image_size = 0;     // ViTs: patch x position-embedding grid, the size it was trained at; 0 = any (CNNs)
    int64_t num_classes = 0;    // rows of the classifier head's weight; 0 when the file has no head
    std::string detail;         // what the keys showed ("basic blocks 2-2-2-2", "width 384, patch 16, 1 blocks")
};

// "module." prefixes (nn.DataParallel) are ignored. Never throws: `model` stays empty and `detail` says why.
CheckpointArchitecture identify_checkpoint(const std::map<std::string, Tensor>& state);

// The input normalisation and resize filter the published weights of a dialect were trained with, under razor's
// checkpoint-metadata keys ("normalize_mean", "normalize_std", "interpolation"), for a file that records none:
// torchvision's ImageNet recipes (mean 0.485,0.456,0.406, std 0.229,0.224,0.225, bilinear), timm's ViTs (0.5, 0.5,
// bicubic) and Hugging Face's ViTImageProcessor (0.5, 0.5, bilinear). Empty for an unknown dialect.
std::map<std::string, std::string> published_preprocessing(const std::string& dialect);

// A file's state dict in `model`'s terms. `head` is the model's classifier path ("fc", "heads.head"); its tensors
// are compared apart from the rest: the head loads only when its weight has the model's shape.
struct FittedState {
    std::string dialect;                            // as to_model_keys chose it
    std::map<std::string, Tensor> state;            // model key -> tensor for every key that fits, head included if it fits
    std::vector<std::string> missing;               // model keys (outside the head) the file lacks
    std::vector<std::string> unexpected;            // file keys (renamed) the model lacks
    std::vector<std::string> mismatched;            // "key (file shape) vs (model shape)"
    Shape file_head;                                // the file's head weight shape (empty when it has none)
    bool head_fits = false;                         // file_head == the model's head weight shape
    std::string resized;                            // "position embedding 14x14 -> 2x2 (bicubic)" or ""
    bool complete() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};

// Throws (naming `source`) only when the keys match no dialect (to_model_keys).
FittedState fit_state(const std::map<std::string, Tensor>& file_state, const nn::Module& model, const std::string& head,
                      const std::string& source);

}  // namespace razor::models
