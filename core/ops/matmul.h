// core/ops/matmul.h -- matrix product with batched, broadcast leading dims.   reference: torch.matmul
#pragma once

#include "core/tensor.h"

namespace razor {

// a (..., M, K) x b (..., K, N) -> (..., M, N); the leading (batch) dims broadcast as in torch.matmul.
// 1-D operands follow torch.matmul too: a (K) is a row (1, K) and b (K) a column (K, 1), and the added dim is
// dropped from the result (two 1-D operands give their dot product, shape ()).
// Views whose last two dims are row-major or transposed (k.transpose(-2, -1)) are used in place, without a copy.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace razor
