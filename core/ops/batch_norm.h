// core/ops/batch_norm.h -- batch normalisation over the channel dimension of (N, C) or (N, C, H, W), optionally
// fused with the ReLU that follows it.
//
// reference: torch.nn.functional.batch_norm (and relu(batch_norm(...))). docs: docs/ops.md "batch_norm",
// docs/back-razor.md §5.4 (BN modes) and §6.3 (razored input), docs/bench-ops.md (fused BN+ReLU figures).
#pragma once

#include "core/tensor.h"

namespace razor {

// x (N, C), (N, C, L) or (N, C, H, W); weight/bias (C) optional (undefined = affine off); running_mean/var (C)
// optional, given together.
// training=true: normalise with batch statistics (biased variance); if running stats are given, update them in place
//   (running = (1-momentum)*running + momentum*batch; the running var takes the UNBIASED batch variance, as
//   PyTorch) under no-grad, bumping their version. A module with PyTorch's momentum=None (cumulative average)
//   passes momentum = 1/num_batches_tracked. Saves x (BatchNormInput), per-channel mean and rstd (Statistics).
// training=false: normalise with the running stats (required): y = x*a + c per channel. Saves x only when weight
//   requires grad (for gweight), so a frozen BN in eval mode saves nothing.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum = 0.1f, float eps = 1e-5f);

// relu(batch_norm(...)) in one op: same arguments, same results (bit-identical forward), same saves as the pair
// (batch_norm's items plus ReLU's 1-bit mask of y > 0), without the intermediate (N, C, ...) tensor and with the
// mask applied inside the BN backward's passes.
Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, float momentum = 0.1f, float eps = 1e-5f);

// The two for an x the caller gives up (bn(conv(x)): a temporary, or std::move). When x.sole_owner(), y is written
// over x in its storage, and the conv-BN pair costs one activation buffer, not two, wherever x's values are not
// needed afterwards:
//   * eval mode with the weight frozen (undefined or not requiring grad), or grad mode off: nothing of x is saved;
//   * training: x is saved first, and y goes over x unless the save kept x itself (the dense tape does; Back
//     Razor's per-channel int8, fp16 or razored BN inputs keep a code or a copy).
// Otherwise (or in anomaly mode) the plain op. Same values and gradients either way.
Tensor batch_norm(Tensor&& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum = 0.1f, float eps = 1e-5f);
Tensor batch_norm_relu(Tensor&& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, float momentum = 0.1f, float eps = 1e-5f);

}  // namespace razor
