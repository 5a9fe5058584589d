// data/resize_aa.h -- antialiased resize (bilinear, bicubic): a separable filter whose support grows with the
// downscale factor, so that shrinking a photo averages every input pixel instead of sampling a few.
//
// reference: torchvision.transforms.functional.resize(img, size, interpolation, antialias=True) on tensors, which
// calls F.interpolate(x.float(), size, mode="bilinear"/"bicubic", align_corners=False, antialias=True) (PyTorch's
// _upsample_bilinear2d_aa / _upsample_bicubic2d_aa, the same filters as PIL's Image.resize). docs: docs/data.md
// "Preprocessing".
//
// For one axis of input length `in` and output length `out`, with scale = in / out:
//   support = (taps / 2) * max(scale, 1)              taps = 2 (bilinear, triangle filter), 4 (bicubic, Keys a = -0.5)
//   centre  = scale * (o + 0.5)                        for output index o
//   inputs  j in [trunc(centre - support + 0.5), trunc(centre + support + 0.5)) clipped to [0, in)
//   weight  = filter((j - centre + 0.5) / max(scale, 1)), normalised to sum 1 over the window.
// The width is resized first, then the height (as PyTorch does), each in float; an axis whose size does not change
// is left alone. u8 images are resized in float and rounded to nearest, ties to even, then clamped to 0..255
// (torchvision's cast back to uint8).
#pragma once

#include <string>

#include "core/tensor.h"

namespace razor::data {

enum class Interpolation { Bilinear, Bicubic };

// "bilinear" / "bicubic" (torchvision's InterpolationMode names).
std::string interpolation_name(Interpolation mode);
// Parses a name; throws naming `what` (a flag or metadata key) with the accepted names.
Interpolation parse_interpolation(const std::string& name, const std::string& what);

// img: (C, H, W) u8 or f32 -> (C, out_h, out_w) of the same dtype.
Tensor resize_antialias(const Tensor& img, int64_t out_h, int64_t out_w, Interpolation mode);

}  // namespace razor::data
