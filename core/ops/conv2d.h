// core/ops/conv2d.h -- 2-D convolution (cross-correlation), NCHW, with stride, padding, dilation and groups.
//
// reference: torch.nn.functional.conv2d. docs: docs/ops.md "Conv kernels".
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/conv_geometry.h"
#include "core/tensor.h"

namespace razor {

struct Conv2dOptions {
    std::array<int64_t, 2> stride{1, 1};     // (sh, sw) >= 1
    std::array<int64_t, 2> padding{0, 0};    // (ph, pw) >= 0, zeros on both sides
    std::array<int64_t, 2> dilation{1, 1};   // (dh, dw) >= 1
    int64_t groups = 1;                      // divides C and OC; groups == C is depthwise
};

// x (N, C, H, W), W (OC, C/groups, KH, KW), b (OC) or undefined -> y (N, OC, OH, OW) with
// OH = (H + 2 ph - dh (KH - 1) - 1) / sh + 1 (floor), and the same for OW.
Tensor conv2d(const Tensor& x, const Tensor& W, const Tensor& b = Tensor(), const Conv2dOptions& options = {});

// The geometry of conv2d(x, W, ., options) for x and W of these shapes; throws conv2d's shape errors.
ConvGeometry conv2d_geometry(const Shape& x, const Shape& W, const Conv2dOptions& options = {});

// The kernel of each pass of a conv: the forward (y), the input gradient (gx) and the weight gradient (gW).
struct ConvAlgorithms {
    ConvAlgorithm forward, input_grad, weight_grad;
};

// What conv2d runs for this geometry under the active kernel family (no Winograd or padded planes under generic). The
// one place that chooses; conv2d's forward and backward both dispatch on it. docs/ops.md "Conv kernels".
ConvAlgorithms select_algorithm(const ConvGeometry& g);

// Whether gW reads a pruned x in its sparse form (core/conv_sparse_input.h) instead of expanding it for the gW
// family select_algorithm chose: decided in backward, where the saved form and its kept fraction are known.
bool sparse_weight_grad_faster(const ConvGeometry& g, double kept_fraction);

// "im2col"; "im2col (gx gemm-1x1, gW im2col)" when the passes differ.
std::string conv_algorithms_str(const ConvAlgorithms& algorithms);

// Whether the algorithm can run g at all in this build (select_algorithm picks among these by speed).
bool conv2d_supports(ConvAlgorithm algorithm, const ConvGeometry& g);

namespace detail {
// Run one pass with the given algorithm (which must support g) on raw buffers, as conv2d does: y (N, OC, OH, OW) from
// x (N, C, H, W), w (OC, Cg, KH, KW), b (OC) or null; gx (N, C, H, W) and/or gw (OC, Cg, KH, KW) (null: not computed)
// from gy (N, OC, OH, OW), with x dense, or null and x_saved expanded per image (not for Depthwise).
void conv2d_forward_with(ConvAlgorithm algorithm, const ConvGeometry& g, const float* x, const float* w,
                         const float* b, float* y);
void conv2d_backward_with(ConvAlgorithm algorithm, const ConvGeometry& g, const float* x, const SavedTensor* x_saved,
                          const float* w, const float* gy, float* gx, float* gw);
}  // namespace detail

}  // namespace razor
