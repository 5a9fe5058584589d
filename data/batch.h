// data/batch.h -- a batch (images f32 (B, C, H, W), labels i64 (B)), and make_batch: rows of an in-memory u8 image
// set to a normalised f32 batch without augmentation (evaluation loops; data::DataLoader for training).
//
// reference: torchvision.transforms.ToTensor + Normalize: x = (pixel / 255 - mean[c]) / std[c].
#pragma once

#include <vector>

#include "data/dataset.h"
#include "core/rng.h"

namespace razor::data {

struct Batch {
    Tensor images;   // (B, C, H, W) f32, normalised
    Tensor labels;   // (B) i64
};

// Gathers rows `indices[begin, end)` of `ds`. mean/std have one entry per channel.
Batch make_batch(const ImageDataset& ds, const std::vector<int64_t>& indices, int64_t begin, int64_t end,
                 const std::vector<float>& mean, const std::vector<float>& std);

// 0, 1, ..., n-1 shuffled with `gen` (Fisher-Yates).
std::vector<int64_t> shuffled_indices(int64_t n, Generator& gen);

}  // namespace razor::data
