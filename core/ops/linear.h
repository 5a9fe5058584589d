// core/ops/linear.h -- y = x W^T + b.   reference: torch.nn.functional.linear
#pragma once

#include "core/tensor.h"

namespace razor {

// x (..., in), W (out, in), b (out) or undefined -> y (..., out). A 1-D x (in) gives y (out), as in torch.
Tensor linear(const Tensor& x, const Tensor& W, const Tensor& b = Tensor());

}  // namespace razor
