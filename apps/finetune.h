// apps/finetune.h -- what `razor finetune` adds to razor train's loop: a pretrained backbone under a new classifier
// head, frozen BatchNorm, and the Back Razor save policy chosen by flags.
//
// reference: the usual PyTorch transfer recipe (load the backbone's state_dict with the head's keys removed, replace
// the head with a fresh nn.Linear(in, new_classes)), and BackRazor_Neurips22's frozen-BN mode (BN in eval mode, its
// affine parameters not trained). docs: docs/back-razor.md "razor finetune", docs/cli.md.
//
// The loop itself is razor train's (apps/train.cpp, run_training with finetune = true): the same flags, checkpoints,
// resume, log and plot, plus --from, --razor, --razor-values and --freeze-bn, and fine-tuning defaults.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/args.h"
#include "apps/checkpoint.h"
#include "core/saved.h"
#include "nn/module.h"

namespace razor::apps {

// razor train (finetune = false) and razor finetune (finetune = true): one loop, two flag sets.
int run_training(const std::vector<std::string>& argv, bool finetune);

// The classifier head: the path of the last Linear module in registration (pre-order) order ("linear" in the
// ResNets, "head" in vit_tiny, "classifier" in the VGGs, "fc3" in lenet5). Throws when the model has no Linear.
std::string classifier_head(const nn::Module& model);

struct PretrainedLoad {
    std::string head;             // the re-initialised head's path
    int64_t loaded = 0;           // tensors copied from the checkpoint
    Shape source_head_weight;     // the checkpoint's head weight shape, (source classes, in)
};

// Copies every tensor of `checkpoint.model` into `model` except the classifier head's, which keeps the fresh
// initialisation `model` was built with (sized to the target classes). Strict for everything else: a key the model
// lacks, a model key the checkpoint lacks, or a shape that differs is an error listing all of them (at most 8 of
// each) with a hint naming the checkpoint's model. `command` and `source` (the --from path) prefix the message.
PretrainedLoad load_pretrained(const std::string& command, const std::string& source, nn::Module& model,
                               const Checkpoint& checkpoint);

// Puts every BatchNorm2d of `model` in eval mode (running statistics used and left untouched) and stops its affine
// parameters from training (requires_grad false). Then a BN saves nothing for backward (core/ops/batch_norm.cpp,
// "Saves:"). Idempotent; call it again after anything that switches the model back to train(). Returns the number of
// BatchNorm2d layers.
int64_t freeze_batchnorm(nn::Module& model);

// The Back Razor flags as given: --razor R --razor-values V --razor-gelu G --razor-bn B --razor-attn A.
struct RazorFlags {
    double ratio = 0;
    std::string values = "fp32", gelu = "d4", bn = "dense", attn = "int8";
};
RazorFlags razor_flags(const Args& args);

// The save policy of those flags: nullptr (the dense tape) for R = 0, else a RazorSavePolicy with ratio R whose
// razored items (conv/linear inputs, BN/LN inputs) keep V values, and whose GELU input is kept as G: d4 (4-bit
// derivative code, the CLI default; a razor extension), fp16 (dense fp16, the reference), fp32 (dense), int8 (dense
// per-sample int8) or razored (pruned like the rest). --razor-bn B: train-mode BatchNorm inputs stay dense (B =
// dense, the default) or are razored (B = razored, the segmentation variant; it diverged in our ResNet-20 fine-tune
// at r = 0.9, see sparse/razor_policy.h). --razor-attn A: matmul operands and softmax outputs (attention's Q, K, V,
// P) dense int8 (A = int8, the CLI default: razored, the vit_tiny fine-tune lost 2.0 points on average over 5
// seeds), razored (the reference; RazorConfig's default) or dense (fp32); see AttentionSave.
// Throws naming the flag for R outside [0, 1) or an unknown V, G, B or A.
std::shared_ptr<const SavePolicy> razor_policy_from_flags(const std::string& command, const RazorFlags& flags);

// The help texts of the four flags (one place for train, finetune, bench and info).
extern const char* const kRazorHelp;
extern const char* const kRazorValuesHelp;
extern const char* const kRazorGeluHelp;
extern const char* const kRazorBnHelp;
extern const char* const kRazorAttnHelp;

}  // namespace razor::apps
