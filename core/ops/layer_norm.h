// core/ops/layer_norm.h -- layer normalisation over the last dimension D.
//
// reference: torch.nn.functional.layer_norm with normalized_shape = (D,). docs: docs/back-razor.md §6.3.
#pragma once

#include "core/tensor.h"

namespace razor {

// x (..., D); weight/bias (D) optional (undefined = affine off).
// Saves x (LayerNormInput) and per-row mean and rstd (Statistics, 2 floats per row); x_hat is recomputed in backward.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);

}  // namespace razor
