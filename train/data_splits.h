// train/data_splits.h -- the data flag family's meaning: a named dataset read from a folder, a class subset, and its
// normalisation statistics; what every training command and razor eval load. docs: docs/cli.md.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/loader.h"

namespace razor::train {

// The names --dataset accepts.
inline const std::vector<std::string> kDatasetNames = {"cifar10", "cifar100", "fashion-mnist", "folder"};

struct DataSplits {
    data::ImageDataset train, test;
    std::vector<float> mean, std;   // per-channel Normalize statistics (of pixel / 255)
};

// Reads `dataset` from `dir` (fashion-mnist: "" = Debian's folder), keeps the classes named in `classes`
// ("2,3,4" indices or "cat,dog" names; "" = all) in both splits, and picks the normalisation statistics (the usual
// published ones for cifar10/100 and fashion-mnist; measured on the training images for a folder).
// `command` prefixes error messages ("razor train"). Throws razor::Error naming the path and a hint.
DataSplits load_splits(const std::string& command, const std::string& dataset, const std::string& dir,
                       const std::string& classes, bool need_train = true);

// "0.1,0.2" -> {0.1, 0.2}; "100,150" -> {100, 150}. Throws naming `flag` on malformed items.
std::vector<double> parse_number_list(const std::string& command, const std::string& flag, const std::string& text);
std::string join_floats(const std::vector<float>& v);

// The training loader of a run: shuffled by `seed` (the order and augmentation of epoch e depend on (seed, e) only),
// augmented with pad-4 random crop and horizontal flip when `augment`, then to float and normalised.
data::DataLoader train_loader(const DataSplits& data, bool augment, int64_t batch, int64_t seed, int64_t workers,
                              bool drop_last = false);

// A checkpoint's model metadata: what razor eval needs to rebuild and feed the model (format, model, dataset,
// num_classes, in_channels, image_size, normalize_mean, normalize_std, classes).
std::map<std::string, std::string> model_metadata(const std::string& model, const std::string& dataset,
                                                  const DataSplits& data);

}  // namespace razor::train
