// core/conv_planes.h -- conv2d as a GEMM over windows of zero-padded image planes: no im2col is built.
//
// reference: torch.nn.functional.conv2d. docs: docs/ops.md "Conv kernels".
//
// Stride 1, dilation 1, one group, "same" padding (KH = 2 ph + 1, KW = 2 pw + 1): the 3x3 pad-1 convs of the CIFAR
// models, on maps too large for Im2colBatched. Needs gemm_rows, i.e. razor's AVX2 or AVX-512 GEMM engine (core/gemm.h):
// under the generic kernel family conv2d_planes_supports is false and these convs run Im2col. Letters as in core/conv_geometry.h.
//
// Each image is copied once into zero-padded planes xp (C, Hp, Wp), Hp = H + 2 ph, Wp = W + 2 pw, each followed by
// 2 pw floats of slack (plane stride Pp = Hp Wp + 2 pw). On the padded-width output grid p = oh Wp + ow (ow < Wp; the
// columns ow >= OW = W are junk, computed and dropped):
//   y[oc, p] = sum_{c,kh,kw} W[oc, c, kh, kw] xp[c, p + kh Wp + kw]                                       -- exact
// so row (c, kh, kw) of im2col is the window of xp[c] that starts at kh Wp + kw, and gemm_rows reads the windows in
// place: no col is built (im2col and col2im were a quarter of a resnet20 step). The junk columns cost Wp / W more
// MACs (6 % at 32x32, 12 % at 16x16). Backward, with gy copied into zero-padded planes gp (OC, Hp, Wp) the same way
// (gy[oc, oh, ow] at gp[oc, (oh + ph) Wp + ow + pw]) and gy'[oc, p] = gp[oc, p + ph Wp + pw], zero in the junk columns:
//   gW[oc, (c, kh, kw)] = sum_p gy'[oc, p] xp[c, p + kh Wp + kw]                 -- exact for a dense x
//   gx[c, q] = sum_{oc,kh,kw} W[oc, c, kh, kw] gy[oc, ih + ph - kh, iw + pw - kw]       (q = ih Wp + iw)
//            = sum_{oc,a,b} Wf[c, (oc, a, b)] gp[oc, q + a Wp + b],   a = KH-1-kh, b = KW-1-kw, 2 ph = KH-1  -- exact
// (an out-of-range oh lands in gp's zero border), i.e. gemm_rows again over windows of gp, with Wf = W transposed
// per tap and flipped. gW is computed transposed per chunk and summed by gw_from_transposed (core/conv_geometry.h).
#pragma once

#include "core/conv_geometry.h"

namespace razor::detail {

// Whether this build and geometry can run PaddedPlanes (gemm_rows available, stride 1, dilation 1, one group,
// same padding).
bool conv2d_planes_supports(const ConvGeometry& g);

// y (N, OC, OH, OW) = conv2d(x (N, C, H, W), w (OC, C, KH, KW)) + b (OC, or null).
void conv2d_planes_forward(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y);

// gx (N, C, H, W) and/or gW (OC, C, KH, KW) from gy (N, OC, OH, OW); a null output is not computed. x dense, or
// null with x_saved expanded one image at a time (as in conv2d_im2col_backward).
void conv2d_planes_backward(const ConvGeometry& g, const float* x, const SavedTensor* x_saved, const float* w,
                            const float* gy, float* gx, float* gw);

}  // namespace razor::detail
