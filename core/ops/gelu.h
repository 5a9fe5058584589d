// core/ops/gelu.h -- y = x Phi(x), the exact (erf) GELU.   reference: torch.nn.functional.gelu (approximate='none')
#pragma once

#include "core/tensor.h"

namespace razor {

Tensor gelu(const Tensor& x);

}  // namespace razor
