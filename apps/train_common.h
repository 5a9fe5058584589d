// apps/train_common.h -- what razor train, eval and bench share: datasets from flags, normalisation statistics,
// evaluation on a test set, counting correct predictions. docs: docs/cli.md.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "nn/module.h"

namespace razor::apps {

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

// Number of rows of logits (N, K) whose largest entry is the label (first maximum wins, as torch.argmax).
int64_t count_correct(const Tensor& logits, const Tensor& labels);

struct EvalResult {
    double loss = 0, accuracy = 0, seconds = 0, images_per_second = 0;
    int64_t images = 0;
    std::vector<int64_t> class_correct, class_total;   // per class
};

// Test-set evaluation in eval mode without a tape (NoGradGuard), batches of `batch` in dataset order; restores the
// model's training flag. Loss is the mean cross-entropy (no label smoothing).
EvalResult evaluate(nn::Module& model, const data::ImageDataset& ds, const std::vector<float>& mean,
                    const std::vector<float>& std, int64_t batch);

}  // namespace razor::apps
