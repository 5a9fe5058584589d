// train/evaluate.h -- a model's accuracy and loss on a test set, and the running-accuracy count of a training step.
//
// reference: the evaluation half of a PyTorch script (model.eval(), torch.no_grad(), argmax accuracy, mean
// cross-entropy). docs: docs/cli.md.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "nn/module.h"

namespace razor::train {

// Number of rows of logits (N, K) whose largest entry is the label (first maximum wins, as torch.argmax).
int64_t count_correct(const Tensor& logits, const Tensor& labels);

struct EvalResult {
    double loss = 0, accuracy = 0, seconds = 0, images_per_second = 0;
    int64_t images = 0;
    std::vector<int64_t> class_correct, class_total;   // per class
};

// How much of the test set, and whether a progress line shows it.
struct EvalOptions {
    int64_t max_batches = 0;   // at most this many batches (0 = the whole set; --eval-steps); `images` says how many
    std::string progress{};    // "" = silent, else the progress line's label on stderr (train/progress.h)
};

// Test-set evaluation in eval mode without a tape (NoGradGuard), batches of `batch` in dataset order; restores the
// model's training flag. Loss is the mean cross-entropy (no label smoothing).
EvalResult evaluate(nn::Module& model, const data::ImageDataset& ds, const std::vector<float>& mean,
                    const std::vector<float>& std, int64_t batch, const EvalOptions& options = {});

// The same with each image fed through `transform` (u8 (C, H, W) -> f32; e.g. data::eval_transform, which brings
// images of any size to the model's resolution).
EvalResult evaluate(nn::Module& model, const data::ImageDataset& ds, const data::TransformPtr& transform, int64_t batch,
                    const EvalOptions& options = {});

}  // namespace razor::train
