// train/train_state.h -- reading back what razor train keeps in train_state.safetensors (checkpoint.h): the run's flags
// (metadata "config", a JSON object of strings) and the optimizer, scheduler, RNG and loop-position tensors.
//
// reference: the resume half of a PyTorch training script (optimizer.load_state_dict, scheduler.load_state_dict,
// torch.set_rng_state, start_epoch = ckpt["epoch"]). docs: docs/cli.md "Checkpoints", docs/reliability.md.
//
// A train state may be damaged or hand-edited, so every entry is checked (present, dtype, shape, range) before it is
// used, and every error names the file and entry, what was expected, what was found and a hint. The fuzz target
// tests/fuzz/fuzz_train_state.cpp feeds these functions arbitrary bytes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/scheduler.h"
#include "train/checkpoint.h"
#include "train/fit_position.h"

namespace razor::train {

// Where the run stood when the checkpoint was written.
struct ResumePoint {
    int64_t epoch = 0;            // epochs completed
    int64_t step = 0;             // optimizer steps taken
    int64_t best_epoch = 0;       // 0 = none evaluated yet
    double best_test_acc = -1;    // -1 = none evaluated yet
};

// The run's flags from metadata "config": flag name -> value. Throws naming `where` when the text is not a JSON
// object whose values are all strings.
std::map<std::string, std::string> parse_run_config(const std::string& json_text, const std::string& where);

// Restores `opt` from the "optimizer.*" entries, `sched` (when not null) from "scheduler.*", the default generator
// from "rng.default" and `init_gen` from "rng.init"; returns epoch, step and the best test accuracy so far. `where`
// names the file in errors ("runs/x/last/train_state.safetensors").
ResumePoint restore_train_state(const std::map<std::string, Tensor>& state, const std::string& where,
                                optim::Optimizer& opt, optim::LRScheduler* sched, Generator& init_gen);

// What a run that goes on training needs from a restored optimizer, checked before its first step (razor train,
// finetune): every group option finite, each group's lr >= 0 and its momentum (SGD's, Adam's beta1) in [0, 1]; and
// the per-parameter state complete: each slot (momentum_buffer, exp_avg, ...) held for every parameter that has any
// state, and -- when the writer recorded it (train metadata "optimizer_entries") -- as many entries as were saved. A
// missing momentum buffer would silently restart at zero and the resume would no longer be bit-exact. Throws
// razor::Error naming `where`, the option or entry, and a hint.
void check_resumed_optimizer(const std::map<std::string, Tensor>& state,
                             const std::map<std::string, std::string>& train_metadata, const optim::Optimizer& opt,
                             const std::string& where);

// The checked per-entry readers restore_train_state is made of, for the commands that keep more in their train state
// (razor sparse-train: s, two optimizers, the chosen subnetwork). Each throws razor::Error naming `where`, the entry,
// what was expected and what was found.
const Tensor& state_entry(const std::map<std::string, Tensor>& state, const std::string& key, const std::string& where);
// A one-element i64 entry in [lo, hi].
int64_t state_i64(const std::map<std::string, Tensor>& state, const std::string& key, const std::string& where,
                  int64_t lo, int64_t hi);
// A generator state (4 x i64, not all zero).
std::array<uint64_t, 4> state_generator(const std::map<std::string, Tensor>& state, const std::string& key,
                                        const std::string& where);
// The entries whose key starts with `prefix`, with the prefix removed ("optimizer." -> what load_state_dict takes).
std::map<std::string, Tensor> state_with_prefix(const std::map<std::string, Tensor>& state, const std::string& prefix);

// What razor train and finetune checkpoint besides the loop's position.
struct DenseRun {
    const nn::Module& model;
    const std::map<std::string, std::string>& model_metadata;   // model, classes, normalisation (epoch is added)
    const optim::Optimizer& opt;
    const optim::LRScheduler* sched;   // null: none
    const Generator& init_gen;
    int64_t loader_seed;
    std::string config_json;           // the run's flags (metadata "config")
    std::string param_groups{};        // the optimiser's groups (metadata "param_groups"; "" = not recorded)
};
// The inverse of restore_train_state: the checkpoint of `run` at `p` -- weights and buffers; optimizer.*, scheduler.*,
// epoch, step, rng.default, rng.init, loader.seed, loader.epoch, best_test_acc, best_epoch; metadata config, epoch,
// step, optimizer, scheduler, optimizer_entries (and param_groups when given). fit() adds its fit.* entries (train/fit_position.h).
Checkpoint dense_checkpoint(const FitPosition& p, const DenseRun& run);

// The inverse of restore_train_state's per-entry readers, used when writing: a generator state as 4 x i64, an i64
// scalar.
Tensor pack_generator_state(const std::array<uint64_t, 4>& s);
Tensor i64_scalar(int64_t v);

}  // namespace razor::train
