// core/conv_depthwise.h -- depthwise conv2d (groups == C): a direct kernel per output channel.
//
// reference: torch.nn.functional.conv2d with groups = in_channels. docs: docs/ops.md "Conv kernels".
//
// Letters as in core/conv_geometry.h. Output channel oc reads input channel ic = oc / mult, mult = OC / C, with its
// own KH x KW filter; any kernel, stride, padding and dilation. A (1, KK) x (KK, OHW) GEMM per channel would waste
// the GEMM machinery, so the taps are plain loops over the valid output rows and columns (valid_range).
//   y[n, oc, oh, ow] = b[oc] + sum_{kh,kw} w[oc, kh, kw] x[n, oc/mult, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]
// The backward (derivation above conv2d_depthwise_backward) reads x dense, or a compressed x one image at a time.
#pragma once

#include "core/conv_geometry.h"   // also declares SavedTensor

namespace razor::detail {

// Whether Depthwise can run g: groups == C (Cg = 1).
bool conv2d_depthwise_supports(const ConvGeometry& g);

// y (N, OC, OH, OW) from x (N, C, H, W), w (OC, 1, KH, KW) and b (OC, or null).
void conv2d_depthwise_forward(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y);

// gx (N, C, H, W) and/or gW (OC, 1, KH, KW) from gy (N, OC, OH, OW); a null output is not computed. gx needs w; gW
// needs x, dense, or else x_saved (a form with has_row_unpack()), expanded one image at a time into a per-thread
// scratch instead of an (N, C, H, W) transient.
void conv2d_depthwise_backward(const ConvGeometry& g, const float* x, const SavedTensor* x_saved, const float* w,
                               const float* gy, float* gx, float* gw);

}  // namespace razor::detail
