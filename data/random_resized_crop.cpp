// data/random_resized_crop.cpp -- RandomResizedCrop (see random_resized_crop.h).
#include "data/random_resized_crop.h"

#include <cmath>

#include "core/check.h"
#include "data/functional.h"

namespace razor::data {

CropWindow random_resized_crop_window(int64_t H, int64_t W, float scale_lo, float scale_hi, float ratio_lo,
                                      float ratio_hi, Generator& gen) {
    const double area = static_cast<double>(H) * static_cast<double>(W);
    const float log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
    for (int attempt = 0; attempt < 10; ++attempt) {
        const double target = area * gen.uniform(scale_lo, scale_hi);
        const double aspect = std::exp(gen.uniform(log_lo, log_hi));
        const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
        const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            const auto top = static_cast<int64_t>(gen.randint(static_cast<uint64_t>(H - h + 1)));
            const auto left = static_cast<int64_t>(gen.randint(static_cast<uint64_t>(W - w + 1)));
            return {top, left, h, w};
        }
    }
    // Centre fallback: the largest window of the image whose aspect lies in [ratio_lo, ratio_hi].
    const double in_ratio = static_cast<double>(W) / static_cast<double>(H);
    int64_t w = W, h = H;
    if (in_ratio < ratio_lo) h = static_cast<int64_t>(std::nearbyint(static_cast<double>(W) / ratio_lo));
    else if (in_ratio > ratio_hi) w = static_cast<int64_t>(std::nearbyint(static_cast<double>(H) * ratio_hi));
    return {(H - h) / 2, (W - w) / 2, h, w};
}

RandomResizedCrop::RandomResizedCrop(int64_t size, Interpolation mode, float scale_lo, float scale_hi, float ratio_lo,
                                     float ratio_hi)
    : size_(size), mode_(mode), scale_lo_(scale_lo), scale_hi_(scale_hi), ratio_lo_(ratio_lo), ratio_hi_(ratio_hi) {
    if (size < 1 || !(scale_lo > 0.f && scale_lo <= scale_hi) || !(ratio_lo > 0.f && ratio_lo <= ratio_hi))
        throw Error(fmt("RandomResizedCrop: expected size >= 1, 0 < scale[0] <= scale[1], 0 < ratio[0] <= ratio[1]; "
                        "got size ", size, ", scale (", scale_lo, ", ", scale_hi, "), ratio (", ratio_lo, ", ",
                        ratio_hi, ")"));
}

Tensor RandomResizedCrop::operator()(const Tensor& img, Generator& gen) const {
    if (img.dim() != 3) throw Error(fmt(repr(), ": expected an image (C, H, W), got ", shape_str(img.shape())));
    const CropWindow c = random_resized_crop_window(img.size(1), img.size(2), scale_lo_, scale_hi_, ratio_lo_,
                                                    ratio_hi_, gen);
    return resize_antialias(crop(img, c.top, c.left, c.h, c.w), size_, size_, mode_);
}

std::string RandomResizedCrop::repr() const {
    return fmt("RandomResizedCrop(size=(", size_, ", ", size_, "), scale=(", scale_lo_, ", ", scale_hi_, "), ratio=(",
               ratio_lo_, ", ", ratio_hi_, "), interpolation=", interpolation_name(mode_), ", antialias=True)");
}

TransformPtr random_resized_crop(int64_t size, Interpolation mode) {
    return std::make_shared<RandomResizedCrop>(size, mode);
}

}  // namespace razor::data
