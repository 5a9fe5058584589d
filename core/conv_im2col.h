// core/conv_im2col.h -- conv2d as im2col + GEMM: the general kernel family (any kernel, stride, padding, dilation
// and groups), in three variants.
//
// reference: torch.nn.functional.conv2d; Chellapilla et al., "High Performance Convolutional Neural Networks for
// Document Processing" (2006) for the im2col lowering. docs: docs/ops.md "Conv kernels".
//
// Letters as in core/conv_geometry.h. col (C*KK, T) holds the columns of T output positions of one image: row
// (c, kh, kw) holds x[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] (0 in the padding); group gi's rows are the block
// gi*Cg*KK : (gi+1)*Cg*KK.
//   forward   y[n] (OC, T): per group, W_gi (OCg, Cg*KK) . col_gi (Cg*KK, T), started from the bias (beta = 1).
//   backward  per tile: gW_gi^T += col_gi . gy_gi^T (see gw_from_transposed), then the same buffer takes
//             gcol_gi = W_gi^T . gy_gi and col2im adds it into gx[n].
// The variants (ConvAlgorithm):
//   Im2col         tiles of output rows of one image (~256 positions), so the tile and the GEMM's packed copy of it
//                  stay in L2 (1 MB here) while the GEMM reads them. With stride 1 and OW == W (3x3 pad 1) a col
//                  row is one shifted copy of the channel plane plus a few zeroed edge entries.
//   Im2colBatched  maps of at most 128 output positions (8x8 and smaller): nb images side by side in one GEMM, so a
//                  2x2 map's GEMM is not 4 columns wide; rows shorter than 8 go through tap tables (and, with
//                  AVX-512, one permute per channel and tap on maps of at most 16 positions).
//   Gemm1x1        1x1, stride 1, no padding: col is x[n] itself (C, HW), so im2col and col2im are skipped.
//
// Per image against one big GEMM per group over the whole batch (col (C*KK, N*OHW) built in parallel, one parallel
// GEMM, then a reorder of the (OC, N*OHW) result to NCHW), at batch 128 on 2 threads (AMD EPYC Zen 4, 1 MB L2 per
// core; bench/ and docs/bench-ops.md), forward / gW in ms, per image vs big GEMM:
//   16->16 32x32: 6.3 / 6.8 vs 40 / 20;  32->32 16x16: 4.9 / 5.4 vs 23 / 13;  64->64 8x8: 5.5 / 5.7 vs 11 / 13.
// Per image wins because its working set stays in L2, while the big GEMM streams a 75 MB col (16 channels at 32x32)
// through memory and pays an extra pass to reorder its result.
#pragma once

#include "core/conv_geometry.h"

namespace razor::detail {

// Images per GEMM of Im2colBatched for this geometry; 1 where the map is too large to batch (> 128 positions).
int64_t im2col_images_per_gemm(const ConvGeometry& g);

// Whether the variant (Im2col, Im2colBatched or Gemm1x1) can run g: Im2col any geometry, Im2colBatched maps of at
// most 128 output positions, Gemm1x1 pointwise convs.
bool conv2d_im2col_supports(ConvAlgorithm variant, const ConvGeometry& g);

// y (N, OC, OH, OW) = conv2d(x (N, C, H, W), w (OC, Cg, KH, KW)) + b (OC, or null).
void conv2d_im2col_forward(const ConvGeometry& g, ConvAlgorithm variant, const float* x, const float* w,
                           const float* b, float* y);

// gx (N, C, H, W) and/or gW (OC, Cg, KH, KW) from gy (N, OC, OH, OW); a null output is not computed. gW reads x
// dense (x) or, when the tape kept it compressed (x_saved with has_row_unpack(), x null), expanded one image at a
// time; gx reads w.
void conv2d_im2col_backward(const ConvGeometry& g, ConvAlgorithm variant, const float* x, const SavedTensor* x_saved,
                            const float* w, const float* gy, float* gx, float* gw);

}  // namespace razor::detail
