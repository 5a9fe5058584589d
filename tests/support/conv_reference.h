// tests/support/conv_reference.h -- conv2d by its definition, in float64: the reference the tests of conv2d's
// kernels compare with (tests/core/test_conv_algorithms.cpp, tests/core/test_winograd.cpp).
#pragma once

#include <vector>

#include "core/core.h"

namespace razor::test {

// y, gx and gW of conv2d for x, w, b (undefined: none) and the upstream gradient gy of the geometry g:
//   y[n, oc, oh, ow] = b[oc] + sum_{c in oc's group, kh, kw} w[oc, c, kh, kw] x[n, c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]
//   gx[n, c, ih, iw] = sum over the (oc, kh, kw, oh, ow) that read it of w[oc, c, kh, kw] gy[n, oc, oh, ow]
//   gw[oc, c, kh, kw] = sum over n, oh, ow of x[n, c, ih, iw] gy[n, oc, oh, ow]
// as float32 tensors of y's, x's and w's shapes, rounded once from the float64 sums.
struct ConvReference {
    Tensor y, gx, gw;
};
ConvReference conv_reference(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b,
                             const Tensor& gy);

}  // namespace razor::test
