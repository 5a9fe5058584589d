// apps/train_options.h -- the typed options of razor train and razor finetune, built from one flag table: the
// command's own flags plus the shared families (apps/run_flags.h: data, run folder; apps/razor_flags.h: --razor-*;
// the optimiser and schedule families here). Fine-tuning is the same table with --from, --freeze-bn and gentler
// defaults. docs: docs/cli.md "razor train", "razor finetune".
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
    int64_t epochs = 30, batch = 128;
    double label_smoothing = 0, clip = 0;
    bool freeze_bn = false;
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

// The optimiser of --opt over `params`, and the schedule of --sched for `spe` steps per epoch (nullptr for none):
// epochs (--warmup-epochs, --milestones, --step-size) convert to iterations.
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimiserFlags& flags, const optim::NamedParameters& params);
std::unique_ptr<optim::LRScheduler> make_scheduler(const TrainOptions& options, optim::Optimizer& opt, int64_t spe);

}  // namespace razor::apps
