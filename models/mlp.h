// models/mlp.h -- a multi-layer perceptron on flattened images: Flatten, (Linear, ReLU) x len(hidden), Linear.
//
// reference: nn.Sequential(nn.Flatten(), nn.Linear(3072, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
// nn.Linear(1024, classes)) in scripts/fixtures/ops_models.py; keys 1.weight, 1.bias, 3.weight, ... (the demo's
// checkpoint names). Init: PyTorch's Linear default. docs: docs/models.md.
//
// The registry's `mlp` is 3072-1024-1024-10 on 3x32x32 images: 4,206,602 parameters.
#pragma once

#include <vector>

#include "nn/sequential.h"

namespace razor::models {

// in_features = C * H * W of the input images.
std::shared_ptr<nn::Sequential> mlp(int64_t in_features, const std::vector<int64_t>& hidden, int64_t num_classes,
                                    Generator& gen);

}  // namespace razor::models
