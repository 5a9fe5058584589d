// core/ops/cross_entropy.h -- mean cross-entropy of logits against class indices, fused log_softmax + nll.
//
// reference: torch.nn.functional.cross_entropy(logits, target, reduction='mean', label_smoothing=...)
// for logits (N, C) and class-index targets (N); no weights, no ignore_index (every target must be a class).
#pragma once

#include "core/tensor.h"

namespace razor {

// logits: (N, C) f32, target: (N) i64 in [0, C), label_smoothing in [0, 1). Returns a 0-d f32 loss.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, float label_smoothing = 0.f);

}  // namespace razor
