// core/conv_winograd.h -- conv2d's 3x3 pad-1 convs by Winograd F(2x2, 3x3) over a batch: forward, gx and gW.
//
// reference: torch.nn.functional.conv2d; Lavin & Gray (CVPR 2016) for the algorithm. docs: docs/ops.md "Conv kernels"
// and "conv2d: Winograd F(2x2, 3x3)".
//
// The glue between conv2d's geometry and the per-call kernels of core/winograd.h (the algebra is there): the batch is
// split into chunks (core/conv_geometry.h), each chunk runs winograd_images_per_call images per call. Runs 3x3,
// stride 1, dilation 1, padding 1, one group, even H and W, where the active kernel family (avx2 or avx512) has the
// kernels (winograd_available()); which of those convs take it is select_algorithm's choice (core/ops/conv2d.cpp).
// Letters as in core/conv_geometry.h, with OH = H and OW = W.
//   forward     y = conv3x3(x) + b, filters transformed once per call (u = G g G^T).
//   input grad  y = conv3x3(x) is, per output position, y[oc, h, w] = sum_{c,kh,kw} W[oc, c, kh, kw] x[c, h+kh-1, w+kw-1],
//               so gx[c, ih, iw] = sum_{oc,kh,kw} W[oc, c, kh, kw] gy[oc, ih-kh+1, iw-kw+1]
//                                = sum_{oc,a,b} W[oc, c, 2-a, 2-b] gy[oc, ih+a-1, iw+b-1]     (a = 2-kh, b = 2-kw)
//               -- a 3x3 pad-1 conv of gy with the filters flipped and transposed, wf[c, oc] = W[oc, c, ::-1, ::-1],
//               run by the same kernel                                                                  -- exact
//   weight grad the adjoint of the forward's algebra: per chunk dU (16, OC, C) = sum over tiles Gy . V^T, the chunks'
//               partials summed in order, then gW = G^T dU G per filter                -- exact for a dense x
#pragma once

#include "core/conv_geometry.h"

namespace razor::detail {

// Whether this build and geometry can run WinogradF2x3.
bool conv2d_winograd_supports(const ConvGeometry& g);

// y (N, OC, H, W) = conv3x3(x (N, C, H, W), w (OC, C, 3, 3), pad 1) + b (OC, or null).
void conv2d_winograd_forward(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y);

// gx (N, C, H, W) from gy (N, OC, H, W) and w (OC, C, 3, 3).
void conv2d_winograd_input_grad(const ConvGeometry& g, const float* w, const float* gy, float* gx);

// gW (OC, C, 3, 3), summed over the batch, from gy and x: dense (x) or, with x null, x_saved expanded a few images at
// a time into the chunk's scratch (approximate if x was razored).
void conv2d_winograd_weight_grad(const ConvGeometry& g, const float* x, const SavedTensor* x_saved, const float* gy,
                                 float* gw);

}  // namespace razor::detail
