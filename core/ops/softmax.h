// core/ops/softmax.h -- softmax and log_softmax along one dimension.
//
// reference: torch.softmax(x, dim) / torch.log_softmax(x, dim). Any dim (negative counts from the end); the
// last dimension is the fast path.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace razor {

Tensor softmax(const Tensor& x, int64_t dim);
// The same, for an x the caller gives up (softmax(matmul(q, k^T), -1)): when x.sole_owner(), P is written over x's
// values in its storage. Same values and gradients; otherwise (or in anomaly mode) the plain op.
Tensor softmax(Tensor&& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace razor
