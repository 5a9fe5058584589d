// core/ops/relu.h -- y = max(x, 0).   reference: torch.nn.functional.relu
#pragma once

#include "core/tensor.h"

namespace razor {

Tensor relu(const Tensor& x);

}  // namespace razor
