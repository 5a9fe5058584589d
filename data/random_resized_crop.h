// data/random_resized_crop.h -- RandomResizedCrop: a random window of random area and aspect ratio, resized to the
// training resolution (the ImageNet training augmentation).
//
// reference: torchvision.transforms.RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3/4, 4/3), antialias=True)
// and its get_params. docs: docs/data.md "Preprocessing".
//
// The window is drawn as torchvision draws it, from this image's Generator (so the draws are razor's, not torch's):
//   up to 10 attempts:  area   = H * W * uniform(scale)
//                       aspect = exp(uniform(log ratio[0], log ratio[1]))
//                       w = round(sqrt(area * aspect)), h = round(sqrt(area / aspect))   (ties to even, as Python)
//                       if 0 < w <= W and 0 < h <= H: top = randint(H - h + 1), left = randint(W - w + 1); done
//   otherwise the centre fallback: the whole image, its aspect clamped into `ratio`, centred (top = (H - h) / 2).
// The window is then resized (antialiased, data/resize_aa.h) to size x size.
#pragma once

#include "core/rng.h"
#include "data/resize_aa.h"
#include "data/transforms.h"

namespace razor::data {

// A crop window: rows [top, top + h), columns [left, left + w).
struct CropWindow {
    int64_t top = 0, left = 0, h = 0, w = 0;
};

// torchvision's RandomResizedCrop.get_params for an H x W image.
CropWindow random_resized_crop_window(int64_t H, int64_t W, float scale_lo, float scale_hi, float ratio_lo,
                                      float ratio_hi, Generator& gen);

class RandomResizedCrop final : public Transform {
public:
    explicit RandomResizedCrop(int64_t size, Interpolation mode = Interpolation::Bilinear, float scale_lo = 0.08f,
                               float scale_hi = 1.f, float ratio_lo = 3.f / 4.f, float ratio_hi = 4.f / 3.f);
    // img: (C, H, W) u8 or f32 -> (C, size, size), same dtype.
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override;

private:
    int64_t size_;
    Interpolation mode_;
    float scale_lo_, scale_hi_, ratio_lo_, ratio_hi_;
};

TransformPtr random_resized_crop(int64_t size, Interpolation mode = Interpolation::Bilinear);

}  // namespace razor::data
