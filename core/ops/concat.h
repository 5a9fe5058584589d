// core/ops/concat.h -- join tensors along an existing dimension.   reference: torch.cat
#pragma once

#include <vector>

#include "core/tensor.h"

namespace razor {

// All inputs share a dtype and every size except `dim` (negative counts from the end); the output's size(dim)
// is the sum of theirs. A packed copy. Differentiable in every f32 input.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

}  // namespace razor
