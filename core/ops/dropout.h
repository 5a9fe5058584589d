// core/ops/dropout.h -- inverted dropout: y = x m / (1 - p), m ~ Bernoulli(1 - p) per element.
//
// reference: torch.nn.functional.dropout(x, p, training). The mask comes from razor's Generator, so it does
// not equal PyTorch's for the same seed; it is the same for a given seed on any number of threads.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace razor {

// training == false or p == 0: returns x itself (no node). p == 1: zeros. Throws for p outside [0, 1].
// Draws one 64-bit seed from gen per call that needs a random mask (training and 0 < p < 1).
Tensor dropout(const Tensor& x, float p, bool training, Generator& gen);

}  // namespace razor
