// core/ops/relu.h -- y = max(x, 0).   reference: torch.nn.functional.relu
#pragma once

#include "core/tensor.h"

namespace razor {

Tensor relu(const Tensor& x);

// relu(add(a, b)) as one op, for a and b of one shape (the residual block's last step): the same values and
// gradients, one pass instead of two, no intermediate sum.
Tensor add_relu(const Tensor& a, const Tensor& b);

}  // namespace razor
