// core/conv_sparse_input.h -- conv2d's weight gradient straight from a sparse saved x (Back Razor's bitmap + values).
//
// reference: torch.nn.grad.conv2d_weight (the quantity). docs: docs/back-razor.md "Sparse weight gradients",
// docs/ops.md "Conv kernels".
//
// With x pruned to a kept fraction f of its elements, gW needs only f of the dense multiplies:
//
//     gW[oc, c, kh, kw] = sum_n sum_{(ih, iw) kept in x[n, c]} x[n, c, ih, iw] gy[n, oc, oh, ow]
//                         where ih = oh*sh - ph + kh*dh and iw = ow*sw - pw + kw*dw
//
// so each kept element adds x * gy[n, :, oh, ow] (a row of OCg output channels) to gW[:, c, kh, kw] for every tap
// (kh, kw) whose (oh, ow) is a whole output position. Per image, gy is transposed to (positions, OC) in a zero-bordered
// grid wide enough that every tap of every input position lands inside it (a tap that falls off the output map reads
// zeros: no bounds test per element); the kept elements are listed per input channel -- and, for a strided conv, per
// phase (ih + ph) mod sh, (iw + pw) mod sw, which decides the taps that reach a whole output position -- as (grid row,
// value); and core/sparse_outer.h sums them into a gW^T (C*KK, OCg) partial per batch chunk, with each list's taps x
// OCg block of sums in registers. The partials are added up in chunk order (core/conv_geometry.h). The dropped
// elements are zeros of the unpacked x, so the result equals unpack-then-dense to float rounding (the order of the
// sums differs); nothing of x is expanded. Runs every conv but depthwise ones (any kernel, stride, padding, dilation,
// group count); which convs take it is sparse_weight_grad_faster's choice (core/ops/conv2d.cpp). Letters as in
// core/conv_geometry.h.
#pragma once

#include "core/conv_geometry.h"
#include "core/sparse_samples.h"

namespace razor::detail {

// Whether the sparse kernel runs g.
bool conv2d_sparse_input_supports(const ConvGeometry& g);

// gW (OC, Cg, KH, KW), summed over the batch, from gy (N, OC, OH, OW) and x (N, C, H, W) in sparse form.
void conv2d_sparse_input_weight_grad(const ConvGeometry& g, const SparseSamples& x, const float* gy, float* gw);

}  // namespace razor::detail
