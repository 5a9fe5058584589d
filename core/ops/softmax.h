// core/ops/softmax.h -- softmax and log_softmax along one dimension.
//
// reference: torch.softmax(x, dim) / torch.log_softmax(x, dim). Any dim (negative counts from the end); the
// last dimension is the fast path.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace razor {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace razor
