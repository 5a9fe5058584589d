// core/ops/conv2d.h -- 2-D convolution (cross-correlation), NCHW, with stride, padding, dilation and groups.
//
// reference: torch.nn.functional.conv2d
#pragma once

#include <array>
#include <cstdint>

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

}  // namespace razor
