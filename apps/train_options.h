// apps/train_options.h -- the typed options of razor train and razor finetune, built from one flag table: the
// command's own flags plus the shared families (apps/run_flags.h: data, run folder; apps/razor_flags.h: --razor-*;
// the optimiser and schedule families here). Fine-tuning is the same table with --from, --freeze-bn and gentler
// defaults, and the fine-tuning controls (--freeze, --train-only, --head-lr-mult, --wd-all; apps/freeze.h,
// apps/param_groups.h). docs: docs/cli.md "razor train", "razor finetune".
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/flag_table.h"
#include "apps/razor_flags.h"
#include "apps/run_flags.h"
#include "optim/optimizer.h"
#include "optim/scheduler.h"
#include "train/checkpoint.h"

namespace razor::apps {

// --opt, --lr, --momentum, --nesterov, --wd
struct OptimiserFlags {
    std::string opt;
    double lr = 0.1, momentum = 0.9, wd = 5e-4;
    bool nesterov = false;
};

// --sched, --warmup-epochs, --milestones, --step-size, --gamma (every schedule is stepped once per iteration)
struct ScheduleFlags {
    std::string sched, milestones_text;
    std::optional<double> warmup;
    int64_t step_size = 30;
    double gamma = 0.1;
};

struct TrainOptions {
    std::string command;   // "razor train" or "razor finetune": prefixes every message
    bool finetune = false;
    std::string model, from, log;
    std::string widths;   // razor train --widths: a ResNet's or VGG's out-channels per masked layer (empty = the zoo's)
    int64_t epochs = 30, batch = 128;
    double label_smoothing = 0, clip = 0;
    bool step_in_backward = false;   // train/steps.h DenseStepOptions::step_in_backward
    bool freeze_bn = false;
    // razor finetune: apps/freeze.h (patterns, comma-separated) and apps/param_groups.h. razor train: none frozen,
    // one group, every parameter decayed (wd_all), as its CIFAR recipes were measured.
    std::string freeze, train_only;
    double head_lr_mult = 1;
    bool wd_all = false;
    DataFlags data;
    RunFlags run;
    OptimiserFlags optimiser;
    ScheduleFlags schedule;
    RazorFlags razor;
    // derived by read_train_options
    double warmup_epochs = 0;            // --warmup-epochs, or its default (onecycle: 30% of --epochs)
    std::vector<int64_t> milestones;     // multistep
};

// The table of razor train (finetune = false) or razor finetune.
const FlagTable<TrainOptions>& train_flag_table(bool finetune);
Args train_args(bool finetune);

// The options of `args` (parsed with train_args), checked: every error names the flag, the expected and the given
// value. On --resume, call with the reconciled flags.
TrainOptions read_train_options(const Args& args, bool finetune);

// On --resume: --epochs may change only for schedules not laid out over all epochs (config_json: the run's
// recorded flags); the data must have the checkpoint's classes, in its label order, at its image size. Both throw
// razor::Error naming the flag or the folder and a hint.
void check_resumed_epochs(const TrainOptions& options, const std::string& config_json);
void check_resumed_data(const std::string& command, const train::Checkpoint& resumed, const train::DataSplits& data);

// The schedule of --sched for `spe` steps per epoch (nullptr for none): epochs (--warmup-epochs, --milestones,
// --step-size) convert to iterations; onecycle peaks at each group's own lr (the optimiser: apps/param_groups.h).
std::unique_ptr<optim::LRScheduler> make_scheduler(const TrainOptions& options, optim::Optimizer& opt, int64_t spe);

}  // namespace razor::apps
