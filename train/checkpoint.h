// train/checkpoint.h -- training checkpoints: a folder holding a consistent pair of safetensors files.
//
// reference: torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), ...}) split in two files, so
// the weights load on their own in PyTorch (model.load_state_dict(safetensors.torch.load_file(...))). docs: docs/cli.md
// "Checkpoints".
//
//   ROOT/NAME/model.safetensors        weights and buffers under PyTorch key names ("layer1.0.conv1.weight",
//                                      "bn1.num_batches_tracked"); metadata: model, classes, normalisation, epoch
//   ROOT/NAME/train_state.safetensors  everything else a resumed run needs (optimizer, scheduler, epoch, step, RNG
//                                      states); metadata: the run's config as JSON
//
// Both files carry the same "pair" id in their metadata; a folder whose two ids differ is refused.
//
// Writing is atomic for the pair, not just per file: both files go into a fresh ROOT/.NAME.tmp.<pid>, each fsynced
// (write_file_atomic), then the folders are switched by renames: NAME -> NAME.old, tmp -> NAME, NAME.old removed.
// A crash at any point leaves NAME or NAME.old holding a complete pair; load_checkpoint falls back to NAME.old when
// NAME is missing or incomplete. A NAME.old left by an interrupted save is removed only after NAME was read back
// whole (else the broken NAME goes and NAME.old stays). Temporary folders .NAME.tmp.<pid> of dead pids are removed;
// those of a live process (another writer) are never touched.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "core/tensor.h"

namespace razor::train {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kTrainStateFile = "train_state.safetensors";

struct Checkpoint {
    std::map<std::string, Tensor> model;                 // model.state_dict()
    std::map<std::string, std::string> model_metadata;
    std::map<std::string, Tensor> train_state;
    std::map<std::string, std::string> train_metadata;
    std::string folder;                                  // where it was read from (".../last" or ".../last.old")
};

// Writes ROOT/NAME as described above (the "pair" metadata is added to both files). Throws razor::Error naming the
// path on failure; the previous ROOT/NAME (or NAME.old) then stays intact.
void save_checkpoint(const std::string& root, const std::string& name, const Checkpoint& checkpoint);

// Reads ROOT/NAME, or ROOT/NAME.old when NAME is missing or incomplete (a note goes to stderr). Throws razor::Error
// naming both folders and a hint when neither holds a complete, consistent pair.
Checkpoint load_checkpoint(const std::string& root, const std::string& name = "last");

// Reads one checkpoint folder (both files, pair ids checked). Throws naming the folder.
Checkpoint load_checkpoint_folder(const std::string& folder);

// What --resume and --checkpoint accept: a run folder (holding last/ or last.old/), a checkpoint folder (holding
// model.safetensors), or -- model_only -- a weights file (.safetensors, or torch.save's .pth / .pt / .bin, told
// apart by content: load_weights_file). Loads it; with model_only the train state may be absent (a lone
// model.safetensors, e.g. written by PyTorch).
Checkpoint open_checkpoint(const std::string& path, bool model_only = false);

// Test seam for the crash-safety suite: fs_step(label) runs the hook, when set, right before each rename and removal
// of a checkpoint switch and of --overwrite (train/run_folder.h), so a test can SIGKILL a writer at every step.
// Process-wide; an empty hook (the default) does nothing.
using FsStepHook = std::function<void(const std::string& step)>;
void set_fs_step_hook_for_testing(FsStepHook hook);
void fs_step(const std::string& step);

}  // namespace razor::train
