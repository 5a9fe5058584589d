// data/center_crop.h -- the evaluation preprocessing: resize the shorter side to size / crop_pct, then cut the
// centred size x size window (crop_pct 0.875: torchvision's Resize(256) + CenterCrop(224)).
//
// reference: torchvision.transforms.Resize(int, antialias=True) and CenterCrop; timm's eval transform
// (scale_size = floor(size / crop_pct)). docs: docs/data.md "Preprocessing".
#pragma once

#include "data/resize_aa.h"
#include "data/transforms.h"

namespace razor::data {

// Resizes (antialiased) so that the shorter side is `size` and the longer one int(size * long / short), as
// torchvision's Resize(int); an image whose shorter side already is `size` is returned as it is.
Tensor resize_shorter_side(const Tensor& img, int64_t size, Interpolation mode);

// The centred h x w window: top = round((H - h) / 2), left = round((W - w) / 2), ties to even as Python's round; a
// window larger than the image is zero-padded around it (torchvision's CenterCrop).
Tensor center_crop(const Tensor& img, int64_t h, int64_t w);

// Resize(floor(size / crop_pct)) then CenterCrop(size): (C, H, W) -> (C, size, size), dtype kept.
class ResizeCenterCrop final : public Transform {
public:
    ResizeCenterCrop(int64_t size, double crop_pct = 0.875, Interpolation mode = Interpolation::Bilinear);
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override;
    int64_t resize_size() const { return resize_; }

private:
    int64_t size_, resize_;
    double crop_pct_;
    Interpolation mode_;
};

TransformPtr resize_center_crop(int64_t size, double crop_pct = 0.875, Interpolation mode = Interpolation::Bilinear);

}  // namespace razor::data
