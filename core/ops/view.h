// core/ops/view.h -- shape ops: reshape, view, flatten, transpose, permute, slice.
//
// reference: torch.reshape / Tensor.view / torch.flatten / torch.transpose / torch.permute / Tensor[a:b:s]
//            (python slicing via torch.narrow / slicing semantics). docs: docs/ops.md.
//
// Views share storage with their input (and so its version counter): reshape of a viewable tensor, view,
// transpose, permute and slice change only shape, strides and offset. reshape/flatten copy only when the input's
// strides cannot express the new shape. All of them work on any dtype; gradients flow for f32.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace razor {

// One -1 allowed (inferred). A view when x's strides allow it, else a packed copy.
Tensor reshape(const Tensor& x, Shape shape);
// As reshape, but throws when a copy would be needed (use reshape, or contiguous() first).
Tensor view(const Tensor& x, Shape shape);
// Merges dims start_dim..end_dim (inclusive, negative counts from the end) into one. A 0-d x gives shape (1).
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
// Swaps two dims: a strided view.
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// out.shape[i] = x.shape[dims[i]]: a strided view. dims must be a permutation of 0..ndim-1 (negatives allowed).
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
// x[..., start:end:step, ...] along `dim`, python-like: negative start/end count from the end and both are
// clamped to [0, size]; an empty range gives size 0. step > 0. A strided view.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);

}  // namespace razor
