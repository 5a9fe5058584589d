// data/center_crop.cpp -- shorter-side resize, centre crop, and the two as the eval transform (see center_crop.h).
#include "data/center_crop.h"

#include <cmath>

#include "core/check.h"
#include "data/functional.h"

namespace razor::data {

Tensor resize_shorter_side(const Tensor& img, int64_t size, Interpolation mode) {
    if (img.dim() != 3) throw Error(fmt("Resize(", size, "): expected an image (C, H, W), got ", shape_str(img.shape())));
    if (size < 1) throw Error(fmt("Resize: expected a shorter-side size >= 1, got ", size));
    const int64_t H = img.size(1), W = img.size(2);
    if (std::min(H, W) == size) return img;
    const int64_t h = H <= W ? size : size * H / W, w = H <= W ? size * W / H : size;
    return resize_antialias(img, h, w, mode);
}

Tensor center_crop(const Tensor& img, int64_t h, int64_t w) {
    if (img.dim() != 3) throw Error(fmt("CenterCrop: expected an image (C, H, W), got ", shape_str(img.shape())));
    const int64_t H = img.size(1), W = img.size(2);
    // Larger than the image: torchvision pads (h - H) / 2 before (floor) and the rest after, then crops at 0.
    const auto offset = [](int64_t in, int64_t out) {
        return in >= out ? static_cast<int64_t>(std::nearbyint(static_cast<double>(in - out) / 2.0)) : -((out - in) / 2);
    };
    if (H == h && W == w) return img;
    return crop(img, offset(H, h), offset(W, w), h, w);
}

ResizeCenterCrop::ResizeCenterCrop(int64_t size, double crop_pct, Interpolation mode)
    : size_(size), crop_pct_(crop_pct), mode_(mode) {
    if (size < 1 || !(crop_pct > 0.0 && crop_pct <= 1.0))
        throw Error(fmt("ResizeCenterCrop: expected size >= 1 and crop_pct in (0, 1], got size ", size, ", crop_pct ",
                        crop_pct, "; hint: 0.875 resizes to 256 for a 224 crop"));
    resize_ = static_cast<int64_t>(std::floor(static_cast<double>(size) / crop_pct));
}

Tensor ResizeCenterCrop::operator()(const Tensor& img, Generator&) const {
    return center_crop(resize_shorter_side(img, resize_, mode_), size_, size_);
}

std::string ResizeCenterCrop::repr() const {
    return fmt("Resize(", resize_, ", ", interpolation_name(mode_), ", antialias=True), CenterCrop(", size_,
               ") [crop_pct ", crop_pct_, "]");
}

TransformPtr resize_center_crop(int64_t size, double crop_pct, Interpolation mode) {
    return std::make_shared<ResizeCenterCrop>(size, crop_pct, mode);
}

}  // namespace razor::data
