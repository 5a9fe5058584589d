// core/ops/index_select.h -- gather slices along one dim by an index list, and its adjoint, index_add.
//
// reference: torch.index_select, torch.index_add. VR-PGE gathers the kept channels with index_select.
#pragma once

#include "core/tensor.h"

namespace razor {

// out = x with dim `dim` replaced by index.numel() slices: out[..., i, ...] = x[..., index[i], ...].
// index: i64, 1-D, every value in [0, x.size(dim)); duplicates allowed (their gradients add).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out = base.clone(); out[..., index[i], ...] += src[..., i, ...]. src has base's shape except size(dim) =
// index.numel(). Differentiable in base and src (not in index).
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace razor
