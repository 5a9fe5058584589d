// apps/finetune.h -- what `razor finetune` adds to razor train: a pretrained backbone under a new classifier head,
// and frozen BatchNorm. The Back Razor flags are apps/razor_flags.h.
//
// reference: the usual PyTorch transfer recipe (load the backbone's state_dict with the head's keys removed, replace
// the head with a fresh nn.Linear(in, new_classes)), and BackRazor_Neurips22's frozen-BN mode (BN in eval mode, its
// affine parameters not trained). docs: docs/back-razor.md "razor finetune", docs/cli.md.
//
// The command itself is razor train's (apps/train.cpp on train/fit.h): the same flags, checkpoints, resume, log and
// plot, plus --from, --freeze-bn, --freeze, --train-only, --head-lr-mult, --wd-all, and fine-tuning defaults
// (apps/train_options.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/param_groups.h"
#include "apps/train_options.h"
#include "nn/module.h"
#include "train/checkpoint.h"

namespace razor::apps {

// The classifier head: the path of the last Linear module in registration (pre-order) order ("linear" in the
// ResNets, "head" in vit_tiny, "classifier" in the VGGs, "fc3" in lenet5). Throws when the model has no Linear.
std::string classifier_head(const nn::Module& model);

// The model a fine-tuning run builds: `model` (--model) when given, else the one the checkpoint records (razor's
// own files), else the architecture its keys name (models/pretrained.h: torchvision / timm / Hugging Face files);
// depth > 0 for a ViT file cut to fewer than 12 blocks. Throws with a hint to pass --model when none can be told.
struct PretrainedModel {
    std::string name;
    int64_t depth = 0;
    // A file trained elsewhere (it records no razor model): the preprocessing its dialect's published weights were
    // trained with (models::published_preprocessing), the fine-tune's defaults under --mean/--std/--interpolation.
    std::map<std::string, std::string> preprocessing;
};
PretrainedModel pretrained_model(const std::string& command, const std::string& source, const std::string& model,
                                 const train::Checkpoint& checkpoint);

struct PretrainedLoad {
    std::string head;             // the classifier head's path
    int64_t loaded = 0;           // tensors copied from the checkpoint
    Shape source_head_weight;     // the checkpoint's head weight shape, (source classes, in); empty if it has none
    bool head_loaded = false;     // the head had the model's shape and was loaded; else it keeps its fresh init
    std::string dialect;          // the checkpoint's key names: torchvision, timm or huggingface
    std::string resized;          // a ViT's position embedding resized to the model's grid ("" when not)
};

// Copies `checkpoint.model` into `model`, its keys renamed from timm's or Hugging Face's names and a ViT's position
// embedding resized to the model's image size (models/pretrained.h). The classifier head loads when its shape is the
// model's (same class count); otherwise it keeps the fresh initialisation `model` was built with (sized to the
// target classes). Strict for everything else: a key the model lacks, a model key the checkpoint lacks, or a shape
// that differs is an error listing all of them (at most 8 of each) with a hint naming the checkpoint's model; a file
// whose keys match no dialect is an error listing its first unmatched keys. `command` and `source` (the --from path)
// prefix the messages.
PretrainedLoad load_pretrained(const std::string& command, const std::string& source, nn::Module& model,
                               const train::Checkpoint& checkpoint);

// What razor finetune prints about the load: "from   FILE: N tensors loaded (timm names; ...)" and one head line,
// "head re-initialised for K classes (checkpoint has M)" or "head   'fc' loaded from the checkpoint (K classes)".
std::string pretrained_lines(const std::string& source, const PretrainedLoad& r, int64_t classes);

// Puts every BatchNorm2d of `model` in eval mode (running statistics used and left untouched) and stops its affine
// parameters from training (requires_grad false). Then a BN saves nothing for backward (core/ops/batch_norm.cpp,
// "Saves:"). Idempotent; call it again after anything that switches the model back to train(). Returns the number of
// BatchNorm2d layers.
int64_t freeze_batchnorm(nn::Module& model);

// What razor train and finetune train: --freeze-bn, --train-only and --freeze applied to `model` (apps/freeze.h),
// then the optimiser's groups over the parameters left trainable (apps/param_groups.h; razor train: one group of
// every parameter). `lines`: what was frozen and the groups, for the start-up output ("" when nothing to say).
struct TrainableParameters {
    std::vector<GroupPlan> groups;
    std::string lines;
};
TrainableParameters trainable_parameters(const TrainOptions& options, nn::Module& model);

}  // namespace razor::apps
