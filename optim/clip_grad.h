// optim/clip_grad.h -- clip_grad_norm_: rescale gradients so their joint norm is at most max_norm.
//
// reference: torch.nn.utils.clip_grad_norm_ (PyTorch 1.13). docs: docs/optim.md.
//
//   total = ( sum over every gradient element x of |x|^norm_type )^(1 / norm_type)     (max |x| for norm_type inf)
//   coef  = max_norm / (total + 1e-6)
//   if coef < 1: every gradient *= coef             (PyTorch multiplies by min(coef, 1); 1 changes nothing)
// Returns total. Parameters without a gradient are skipped (no error); with none at all the norm is 0.
// The sum is accumulated in double over fixed chunks of 2^16 elements added in order, so the result does not
// depend on the thread count. A non-finite total throws when error_if_nonfinite; otherwise, as PyTorch, the
// gradients are multiplied by the (NaN or 0) coefficient.
#pragma once

#include <limits>
#include <vector>

#include "optim/optimizer.h"

namespace razor::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
double clip_grad_norm_(const NamedParameters& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace razor::optim
