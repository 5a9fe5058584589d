// apps/sparse_options.h -- the typed options of razor sparse-train, built from one flag table: its VR-PGE and
// fine-tune flags plus the shared families (apps/run_flags.h: data, run folder). docs: docs/cli.md "razor
// sparse-train", docs/vr-pge.md.
#pragma once

#include <string>

#include "apps/flag_table.h"
#include "apps/run_flags.h"
#include "train/vrpge_trainer.h"

namespace razor::apps {

struct SparseOptions {
    std::string model, score_norm, estimator, projection, variant;
    double keep = 0.5, lr = 0.1, lr_s = 12e-3, momentum = 0.9, wd = 5e-4, clip = 3, s_init = 0.5, finetune_lr = 1e-3;
    int64_t epochs = 300, batch = 128, align = 0, candidates = 10, select_batches = 20, finetune_epochs = 40;
    int64_t resample_every = 1;
    bool stream_masks = false;
    DataFlags data;
    RunFlags run;
};

const FlagTable<SparseOptions>& sparse_flag_table();
Args sparse_args();

// The options of `args`, checked (every error names the flag, the expected and the given value).
SparseOptions read_sparse_options(const Args& args);

// Phase A's trainer options: s init, Adam on s, SGD on w, the step's rho, clip, score norm, estimator, projection,
// variant and alignment, the resampling interval and the stream masks.
train::VrpgeTrainerOptions vrpge_options(const SparseOptions& o);

}  // namespace razor::apps
