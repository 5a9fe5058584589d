// train/data_splits.h -- the data flag family's meaning: a named dataset read from a folder, a class subset, and its
// normalisation statistics; what every training command and razor eval load. docs: docs/cli.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/preprocess.h"

namespace razor::train {

// The names --dataset accepts.
inline const std::vector<std::string> kDatasetNames = {"cifar10", "cifar100", "fashion-mnist", "folder"};

struct DataSplits {
    data::ImageDataset train, val, test;   // val and test may be empty (size 0); a folder has at least one of them
    std::vector<float> mean, std;          // per-channel Normalize statistics (of pixel / 255)
    int64_t image_size = 0;                // the model's input is image_size x image_size
    double crop_pct = 1.0;                 // eval: shorter side resized to floor(image_size / crop_pct), centre crop
    data::Interpolation interpolation = data::Interpolation::Bilinear;
    std::string dir;                       // the dataset folder, absolute
    double val_split = 0;                  // > 0: val was carved from train/ with val_seed
    uint64_t val_seed = 0;

    data::Preprocess preprocess() const { return {image_size, crop_pct, interpolation, mean, std}; }
    // What training evaluates on and best/ is chosen by: the validation split when there is one, else test.
    const data::ImageDataset& eval_set() const { return val.size() > 0 ? val : test; }
    std::string eval_split() const { return val.size() > 0 ? "val" : "test"; }   // eval_set()'s name
};

// How load_splits reads and preprocesses (the data flags; razor eval fills them from checkpoint metadata).
struct SplitOptions {
    std::string classes;                   // --classes: "2,3,4" indices or "cat,dog" names; "" = all
    std::vector<std::string> class_names;  // when `classes` is empty: keep these, in this order (a checkpoint's)
    bool need_train = true;                // false: train/ is read only to carve val (razor eval)
    int64_t image_size = 0;                // 0: the images' own size when they share one square size, else 224
    double val_split = 0;                  // folder: carve this fraction of train/ as val (no val/ folder allowed)
    uint64_t val_seed = 0;
    std::optional<double> crop_pct;        // default: 0.875 for a folder, 1 for the fixed-size sets
    data::Interpolation interpolation = data::Interpolation::Bilinear;
    std::vector<float> mean, std;          // empty: the published (cifar, fashion-mnist) or measured (folder) ones
};

// Reads `dataset` from `dir` (fashion-mnist: "" = Debian's folder) and keeps the classes asked for in every split.
// A folder is ROOT/train/CLASS/*.jpg with ROOT/val/ and/or ROOT/test/ (or val carved by val_split); its images may
// have any sizes (decoded on the loader's threads; every split must have the same class folders). Normalisation
// statistics: given, else the usual published ones for cifar10/100 and fashion-mnist, measured on the training
// images for a folder. `command` prefixes error messages ("razor train"). Throws razor::Error naming the path and a
// hint.
DataSplits load_splits(const std::string& command, const std::string& dataset, const std::string& dir,
                       const SplitOptions& options);
DataSplits load_splits(const std::string& command, const std::string& dataset, const std::string& dir,
                       const std::string& classes, bool need_train = true);

// "0.1,0.2" -> {0.1, 0.2}; "100,150" -> {100, 150}. Throws naming `flag` on malformed items.
std::vector<double> parse_number_list(const std::string& command, const std::string& flag, const std::string& text);
std::string join_floats(const std::vector<float>& v);

// The training loader of a run: shuffled by `seed` (the order and augmentation of epoch e depend on (seed, e) only),
// through data::train_transform (data/preprocess.h); augment = false is Augment::None (the eval transform).
data::DataLoader train_loader(const DataSplits& data, data::Augment augment, int64_t batch, int64_t seed,
                              int64_t workers, bool drop_last = false);
data::DataLoader train_loader(const DataSplits& data, bool augment, int64_t batch, int64_t seed, int64_t workers,
                              bool drop_last = false);

// A checkpoint's model metadata: what razor eval and predict need to rebuild and feed the model with nothing else
// (format, model, dataset, data (the folder, absolute), num_classes, in_channels, image_size, crop_pct,
// interpolation, normalize_mean, normalize_std, classes (comma-joined), class_names (a JSON array), val_split,
// val_seed).
std::map<std::string, std::string> model_metadata(const std::string& model, const std::string& dataset,
                                                  const DataSplits& data);

// "(cat, dog)": class names for messages.
std::string join_names(const std::vector<std::string>& names);

// The class names a checkpoint's metadata records (class_names, else the comma-joined classes); empty if none.
std::vector<std::string> metadata_class_names(const std::map<std::string, std::string>& metadata);

}  // namespace razor::train
