// core/ops/linear.h -- y = x W^T + b.   reference: torch.nn.functional.linear
#pragma once

#include "core/tensor.h"

namespace razor {

// x (..., in), W (out, in), b (out) or undefined -> y (..., out). A 1-D x (in) gives y (out), as in torch.
Tensor linear(const Tensor& x, const Tensor& W, const Tensor& b = Tensor());

// Whether gW reads a pruned x (Back Razor) in its sparse form rather than unpacking it for the GEMM: decided in
// backward from the kept fraction of the saved form.
bool linear_sparse_weight_grad_faster(double kept_fraction);

}  // namespace razor
