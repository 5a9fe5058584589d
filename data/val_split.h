// data/val_split.h -- a validation split carved reproducibly from a training set (--val-split F).
//
// reference: torch.utils.data.random_split with a seeded generator, made stratified (every class keeps its share,
// as sklearn's train_test_split(stratify=labels)) so that a small class is never left out of validation.
// docs: docs/data.md "Image folders".
//
// Per class c with n_c images, in label order: its rows are shuffled by one Generator(seed) and the first
// k_c = round(F * n_c) go to validation, clamped so that a class of >= 2 images gives at least one and keeps at least
// one for training. Both parts keep dataset order. The split is a pure function of (labels, F, seed).
#pragma once

#include <cstdint>
#include <utility>

#include "data/dataset.h"

namespace razor::data {

struct TrainValSplit {
    ImageDataset train, val;
};

// Throws unless 0 < fraction < 1.
TrainValSplit split_train_val(const ImageDataset& ds, double fraction, uint64_t seed);

}  // namespace razor::data
