// core/ops/relu.h -- y = max(x, 0), and relu6 y = min(max(x, 0), 6).
// reference: torch.nn.functional.relu, torch.nn.functional.relu6 (= hardtanh(x, 0, 6))
#pragma once

#include <vector>

#include "core/tensor.h"

namespace razor {

Tensor relu(const Tensor& x);

// relu(add(a, b)) as one op, for a and b of one shape (the residual block's last step): the same values and
// gradients, one pass instead of two, no intermediate sum.
Tensor add_relu(const Tensor& a, const Tensor& b);
// The same, for an `a` the caller gives up (add_relu(std::move(h), identity)): when a.sole_owner(), y is written over
// a's values in its storage (the op needs neither input in backward, only y's mask), so the block's output costs no
// new buffer. As torchvision's `out += identity; out = relu(out)`. Otherwise (or in anomaly mode) the plain op.
Tensor add_relu(Tensor&& a, const Tensor& b);

// The residual add of two channel subsets onto their union, then ReLU, as one op: y (N, channels, S...) with
//     y[:, c] = max(a[:, i] + b[:, j], 0)   where a_at[i] == c and b_at[j] == c,
// a term left out where its input does not hold channel c (a channel neither holds is 0). a is (N, |a_at|, S...),
// b (N, |b_at|, S...); positions are distinct channels below `channels`. The same values and gradients, bit for
// bit, as relu(index_add(index_add(zeros, 1, a_at, a), 1, b_at, b)), in one pass with no zero fill and no copy of
// either input (nn::add_relu on compact residual streams, models/channel_plan.h). Saves the same 1-bit mask as
// add_relu.
Tensor add_relu_channels(const Tensor& a, const std::vector<int64_t>& a_at, const Tensor& b,
                         const std::vector<int64_t>& b_at, int64_t channels);

// min(max(x, 0), 6): MobileNetV2's activation. Gradient 1 strictly inside (0, 6), else 0 (as PyTorch's hardtanh).
Tensor relu6(const Tensor& x);
// The same for an x the caller gives up: y is written over x when x.sole_owner() (relu6 saves only its mask), so
// BatchNorm -> ReLU6 costs one activation buffer, not two. Otherwise (or in anomaly mode) the plain op.
Tensor relu6(Tensor&& x);

}  // namespace razor
