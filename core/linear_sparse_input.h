// core/linear_sparse_input.h -- linear's weight gradient straight from a sparse saved x (Back Razor's bitmap + values).
//
// reference: torch.nn.functional.linear's backward (gW = g^T x). docs: docs/back-razor.md "Sparse weight gradients".
//
// x (M, in) is saved as `samples` samples of M / samples rows each (dim 0 of x's original shape is the batch:
// (B, T, in) for a transformer's tokens). With a kept fraction f of x's elements,
//
//     gW[o, j] = sum_m g[m, o] x[m, j] = sum_{(m, j) kept} x[m, j] g[m, o]
//
// so each kept element adds x * g[m, :] (a contiguous row of `out`) to gW^T[j, :]: f of the dense multiplies and
// nothing of x expanded. Per sample, the kept elements are listed per column j as (row, value), and
// core/sparse_outer.h sums them into a gW^T (in, out) partial per batch chunk (core/conv_geometry.h's batch_chunks),
// over column blocks of `out` narrow enough for the sample's block of g to stay in L2; the partials are added up in
// chunk order. Equal to unpack-then-GEMM to float rounding (the order of the sums differs).
#pragma once

#include <cstdint>

#include "core/sparse_samples.h"

namespace razor::detail {

// gW (out, in) from g (M, out) and x (M, in) in sparse form (x.samples * x.sample_numel == M * in).
void linear_sparse_input_weight_grad(const SparseSamples& x, int64_t M, int64_t in, int64_t out, const float* g,
                                     float* gw);

}  // namespace razor::detail
