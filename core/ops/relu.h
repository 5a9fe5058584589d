// core/ops/relu.h -- y = max(x, 0), and relu6 y = min(max(x, 0), 6).
// reference: torch.nn.functional.relu, torch.nn.functional.relu6 (= hardtanh(x, 0, 6))
#pragma once

#include "core/tensor.h"

namespace razor {

Tensor relu(const Tensor& x);

// relu(add(a, b)) as one op, for a and b of one shape (the residual block's last step): the same values and
// gradients, one pass instead of two, no intermediate sum.
Tensor add_relu(const Tensor& a, const Tensor& b);

// min(max(x, 0), 6): MobileNetV2's activation. Gradient 1 strictly inside (0, 6), else 0 (as PyTorch's hardtanh).
Tensor relu6(const Tensor& x);

}  // namespace razor
