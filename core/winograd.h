// core/winograd.h -- 3x3 stride-1 "same" convolution by Winograd's minimal filtering F(2x2, 3x3).
//
// reference: Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (CVPR 2016), §4.1. docs: docs/ops.md
// "conv2d: Winograd F(2x2, 3x3)".
//
// conv2d runs 3x3 pad-1 convs on maps with even H and W this way (core/conv_winograd.h): forward (y from x), the
// input gradient (gx from gy, a 3x3 pad-1 conv with the filters flipped and in/out channels swapped) and the weight
// gradient (the adjoint, below).
//
// The 1-D identity (correlation, as conv2d computes it): two outputs of a 3-tap filter g over 4 inputs d,
//   y0 = d0 g0 + d1 g1 + d2 g2,  y1 = d1 g0 + d2 g1 + d3 g2,
// take 4 multiplies instead of 6:
//   m0 = (d0 - d2) g0,  m1 = (d1 + d2)(g0 + g1 + g2)/2,  m2 = (d2 - d1)(g0 - g1 + g2)/2,  m3 = (d1 - d3) g2,
//   y0 = m0 + m1 + m2,  y1 = m1 - m2 - m3,
// i.e. y = A^T [(G g) . (B^T d)] with the 4x4 B^T, 4x3 G and 2x4 A^T read off above. Nested over rows and columns, a
// 2x2 output tile from a 4x4 input tile d and a 3x3 filter g is
//   Y = A^T [ (G g G^T) . (B^T d B) ] A      (. elementwise over the 16 positions xi of the 4x4 transformed tile)
// and summed over input channels c the 16 elementwise products become 16 matrix products:
//   M[xi] (OC, T) = U[xi] (OC, C) . V[xi] (C, T),   U[xi] = (G g G^T)[xi],  V[xi] = (B^T d B)[xi],
// for the T 2x2 tiles of an image. 16 x OC x C x T multiplies against the direct 9 x OC x C x 4T: 2.25x fewer. The
// transforms are additions, O((C + OC) T), and the filter transform is done once per call.
//
// Numerics: not bit-identical to the direct conv (other additions, the halves in G); the error stays within a few
// float ulps of the sums (tests/core/test_winograd.cpp compares with a float64 direct conv).
#pragma once

#include <cstdint>

#include "core/isa.h"

namespace razor::detail {

// Whether family isa has the kernels below and this CPU runs it (avx2 and avx512 have them, generic has none);
// without an argument, for the active family (active_isa()). Which convs run them is select_algorithm's choice
// (core/ops/conv2d.cpp); core/conv_winograd.h runs them over a batch.
bool winograd_available(Isa isa);
bool winograd_available();

// u (16, OC, C) = G g G^T of each filter g = w[oc, c] (3x3), w (OC, C, 3, 3). With flip, the filters of the input
// gradient instead: g = w[c', oc', ::-1, ::-1] for output channel c' and input channel oc' of that conv, w still
// (C, OC, 3, 3) in the forward's terms (so here OC and C are the gradient conv's: OC = forward C, C = forward OC).
void winograd_filters(const float* w, int64_t OC, int64_t C, bool flip, float* u);

// Images per winograd_conv3x3 call: 1 for maps of more than 16 tiles (larger than 8x8), else as many as make the
// GEMMs at least 128 tiles wide, or more while V and M stay within 512 KB.
int64_t winograd_images_per_call(int64_t C, int64_t OC, int64_t H, int64_t W);

// Floats of scratch that winograd_conv3x3 needs for winograd_images_per_call(C, OC, H, W) images.
int64_t winograd_scratch_floats(int64_t C, int64_t OC, int64_t H, int64_t W);

// y (nb, OC, H, W) = conv3x3(x, pad 1) + bias for nb <= winograd_images_per_call images x (nb, C, H, W). The zero
// padding is never stored in x's layout (AVX-512: masked loads; AVX2: one band's rows copied into a zero-padded
// strip in scratch). u from winograd_filters; bias (OC) or null. Runs on the
// calling thread (its GEMMs too). isa: the kernel family (winograd_available(isa) must hold; throws otherwise).
void winograd_conv3x3(Isa isa, const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W,
                      int64_t nb, const float* bias, float* y, float* scratch);

// The weight gradient, by the adjoint of the same algebra: with Gy[xi] = (A gy_tile A^T)[xi] for each 2x2 tile of gy
// (A = (A^T)^T), dL/dU[xi] (OC, C) = sum over tiles Gy[xi] (OC, T) . V[xi]^T (T, C) -- 16 GEMMs again, 2.25x fewer
// multiplies than the direct gW -- and dL/dg = G^T dU G per filter.
// du (16, OC, C) (+)= the first part for nb <= winograd_images_per_call images x (nb, C, H, W), gy (nb, OC, H, W).
// accumulate: add to du instead of overwriting it.
void winograd_filter_grad(Isa isa, int64_t OC, int64_t C, const float* x, const float* gy, int64_t H, int64_t W,
                          int64_t nb, bool accumulate, float* du, float* scratch);
// gw (OC, C, 3, 3) = G^T du G per (oc, c).
void winograd_filter_grad_to_weights(const float* du, int64_t OC, int64_t C, float* gw);

}  // namespace razor::detail
