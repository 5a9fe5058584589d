// apps/checkpoint_model.h -- what razor eval and razor predict read from a checkpoint's metadata to rebuild and feed
// its model with nothing else given: the model name, sub-network widths and ViT depth, the class names, the
// preprocessing (resolution, eval crop, interpolation, mean/std) and where its data lies. The keys are written by
// train::model_metadata (train/data_splits.h); "depth" by razor finetune from a ViT file cut to fewer blocks
// (apps/train.cpp). docs: docs/cli.md "razor eval", "razor predict".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/flag_table.h"
#include "data/preprocess.h"
#include "nn/module.h"
#include "train/checkpoint.h"

namespace razor::apps {

// --checkpoint, --batch, --threads, --json: the flags razor eval and razor predict share.
struct CheckpointFlags {
    std::string checkpoint;
    int64_t batch = 0, threads = 0;
    bool json = false;
};
// --batch's default is the command's (set_default("batch", ...)).
const FlagTable<CheckpointFlags>& checkpoint_flag_family();
// "COMMAND: --batch must be >= 1, got 0" and the like for --batch and --threads.
void check_checkpoint_flags(const std::string& command, const CheckpointFlags& f);

struct CheckpointInputs {
    std::string model, dataset, data;          // "" where not recorded (a PyTorch-written model.safetensors)
    std::vector<std::string> class_names;      // label order; empty where not recorded
    int64_t num_classes = 0, in_channels = 3;  // 0 classes: not recorded
    int64_t image_size = 0;                    // 0: not recorded
    double crop_pct = 1;                       // not recorded: 1 (checkpoints from before crop_pct were not cropped)
    data::Interpolation interpolation = data::Interpolation::Bilinear;
    std::vector<float> mean, std;              // empty where not recorded
    double val_split = 0;
    uint64_t val_seed = 0;
    std::vector<int64_t> widths;               // a sparse-train subnetwork's per-conv widths
    int64_t depth = 0;                         // a ViT's transformer blocks; 0: not recorded (the default, 12)
};

// The metadata of `ck`, checked: a malformed number names its key. `command` prefixes messages.
CheckpointInputs read_checkpoint_inputs(const std::string& command, const train::Checkpoint& ck);

// The model `name` with `classes` outputs for (C, S, S) inputs, loaded strictly from `ck`; a checkpoint that does not
// fit names the model, the classes and the image shape, then the keys that differ.
std::shared_ptr<nn::Module> model_from_checkpoint(const std::string& command, const train::Checkpoint& ck,
                                                  const std::string& name, int64_t classes, const CheckpointInputs& in);

}  // namespace razor::apps
