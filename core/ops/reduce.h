// core/ops/reduce.h -- reductions: sum, mean, max (values) and argmax over dims.
//
// reference: torch.sum, torch.mean, torch.max(x, dim) (values), torch.argmax.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace razor {

// Sum of all elements: shape ().
Tensor sum(const Tensor& x);
// Sum over `dims` (negative counts from the end; each at most once). keepdim keeps them as size 1.
// As torch 1.13, an empty `dims` list reduces every dim.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// The largest value along `dim` (NaN counts as largest, as torch). Its gradient goes to the first maximum.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
// Index (i64) of the first maximum along `dim`. Not differentiable (records no node).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace razor
