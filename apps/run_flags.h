// apps/run_flags.h -- the flag families razor train, finetune and sparse-train share, each declared once: the data
// (--dataset, --data, --classes, --augment, --workers, --image-size, --val-split, --val-seed, --crop-pct,
// --interpolation, --mean, --std) and the run folder with its loop controls (--out, --resume,
// --overwrite, --stop-after, --save-every, --threads, --seed, --eval-every, --eval-batch, --steps-per-epoch, --skip-nonfinite); and
// the synthetic-input model of razor bench and razor info.
// docs: docs/cli.md.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "apps/flag_table.h"
#include "core/check.h"
#include "train/data_splits.h"

namespace razor::apps {

struct DataFlags {
    std::string dataset, data, classes, augment, interpolation, mean, std;
    int64_t workers = 1, image_size = 0, val_seed = 0;
    double val_split = 0;
    std::optional<double> crop_pct;
};

struct RunFlags {
    std::string out, resume;
    bool overwrite = false, skip_nonfinite = false;
    int64_t stop_after = 0, threads = 0, seed = 0, eval_every = 1, eval_batch = 0, steps_per_epoch = 0, save_every = 0;
    // eval_batch 0: the command's --batch (its options reader resolves it)
    int64_t eval_steps = 0;   // at most this many evaluation batches (0 = the whole test set)
};

// --model, --classes, --channels, --image-size: a zoo model on synthetic input (razor bench, razor info).
struct ModelInputFlags {
    std::string model;
    int64_t classes = 10, channels = 3, image_size = 32;
};

const FlagTable<DataFlags>& data_flag_family();
// What the data flags ask load_splits for. A preprocessing flag left out (--image-size, --interpolation, --mean,
// --std) takes the value `defaults` records when given (a checkpoint's model metadata: a fine-tune's --from, so the
// backbone sees the statistics it was trained with), else the dataset's.
train::SplitOptions split_options(const std::string& command, const DataFlags& f,
                                  const std::map<std::string, std::string>* defaults);
// --augment auto: rrc+flip for a folder (photos of any size), crop+flip for the fixed-size sets.
data::Augment augment_of(const DataFlags& f);
const FlagTable<ModelInputFlags>& model_input_flag_family();
// --out's default is the command's (set_default("out", ...)).
const FlagTable<RunFlags>& run_flag_family();

// Upper bounds of integer flags: far above any real run, far below where epochs x steps x batch or a cast to int
// could overflow.
constexpr int64_t kMaxThreads = 1024, kMaxImageSize = 16384, kMaxEpochs = 1000000, kMaxCount = int64_t{1} << 31;

// Checks a family's values (ranges, names), naming the flag: "razor train: --workers must be >= 0, got -1".
void check_data_flags(const std::string& command, const DataFlags& f);
void check_run_flags(const std::string& command, const RunFlags& f);

// "razor train: --FLAG must be EXPECTED, got GOT" unless ok.
template <class T>
void require(const std::string& command, bool ok, const std::string& flag, const T& got, const std::string& expected) {
    if (!ok) throw Error(fmt(command, ": --", flag, " must be ", expected, ", got ", got));
}
// "razor train: --FLAG must be one of a | b | c; got 'x'" unless got is one of them.
void require_one_of(const std::string& command, const std::string& flag, const std::string& got,
                    const std::vector<std::string>& valid);

}  // namespace razor::apps
