// core/ops/gelu.h -- y = x Phi(x), the exact (erf) GELU.   reference: torch.nn.functional.gelu (approximate='none')
#pragma once

#include "core/tensor.h"

namespace razor {

Tensor gelu(const Tensor& x);
// The same, for an x the caller gives up (gelu(fc1(x))): when x.sole_owner() and the tape keeps a code or copy of x
// rather than x itself, y is written over x's values in its storage. Same values and gradients; otherwise (or in
// anomaly mode) the plain op.
Tensor gelu(Tensor&& x);

}  // namespace razor
