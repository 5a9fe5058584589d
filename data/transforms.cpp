// data/transforms.cpp -- torchvision-style transforms (see transforms.h).
#include "data/transforms.h"

#include "core/check.h"
#include "data/functional.h"

namespace razor::data {
namespace {
std::string list_str(const std::vector<float>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt(v[i]);
    return s + "]";
}
}  // namespace

Compose::Compose(std::vector<TransformPtr> transforms) : transforms_(std::move(transforms)) {
    for (size_t i = 0; i < transforms_.size(); ++i)
        if (!transforms_[i]) throw Error(fmt("Compose: transform ", i, " is null"));
}

Tensor Compose::operator()(const Tensor& img, Generator& gen) const {
    Tensor x = img;
    for (const TransformPtr& t : transforms_) x = (*t)(x, gen);
    return x;
}

std::string Compose::repr() const {
    std::string s = "Compose(";
    for (size_t i = 0; i < transforms_.size(); ++i) s += (i ? ", " : "") + transforms_[i]->repr();
    return s + ")";
}

RandomCrop::RandomCrop(int64_t size_h, int64_t size_w, int64_t padding) : h_(size_h), w_(size_w), padding_(padding) {
    if (h_ < 1 || w_ < 1 || padding_ < 0)
        throw Error(fmt("RandomCrop: expected size >= 1 and padding >= 0, got size (", h_, ", ", w_, "), padding ", padding_));
}

Tensor RandomCrop::operator()(const Tensor& img, Generator& gen) const {
    if (img.dim() != 3) throw Error(fmt(repr(), ": expected an image (C, H, W), got ", shape_str(img.shape())));
    const int64_t H = img.size(1) + 2 * padding_, W = img.size(2) + 2 * padding_;   // padded size
    if (H < h_ || W < w_)
        throw Error(fmt(repr(), ": the padded image is ", H, "x", W, ", smaller than the ", h_, "x", w_,
                        " crop; hint: resize first or raise padding"));
    // torchvision draws nothing when the crop is the whole (padded) image.
    const int64_t top = H == h_ ? 0 : static_cast<int64_t>(gen.randint(static_cast<uint64_t>(H - h_ + 1)));
    const int64_t left = W == w_ ? 0 : static_cast<int64_t>(gen.randint(static_cast<uint64_t>(W - w_ + 1)));
    // Offsets in the padded image -> offsets in the original; crop() fills what lies outside with zeros.
    return crop(img, top - padding_, left - padding_, h_, w_);
}

std::string RandomCrop::repr() const { return fmt("RandomCrop(size=(", h_, ", ", w_, "), padding=", padding_, ")"); }

RandomHorizontalFlip::RandomHorizontalFlip(float p) : p_(p) {
    if (!(p >= 0.f && p <= 1.f)) throw Error(fmt("RandomHorizontalFlip: expected p in [0, 1], got ", p));
}

Tensor RandomHorizontalFlip::operator()(const Tensor& img, Generator& gen) const {
    return gen.uniform() < p_ ? hflip(img) : img;
}

std::string RandomHorizontalFlip::repr() const { return fmt("RandomHorizontalFlip(p=", p_, ")"); }

Resize::Resize(int64_t h, int64_t w) : h_(h), w_(w) {
    if (h < 1 || w < 1) throw Error(fmt("Resize: expected a size of at least 1x1, got ", h, "x", w));
}

Resize::Resize(int64_t smaller_edge) : edge_(smaller_edge) {
    if (smaller_edge < 1) throw Error(fmt("Resize: expected a smaller-edge size >= 1, got ", smaller_edge));
}

Tensor Resize::operator()(const Tensor& img, Generator&) const {
    if (img.dim() != 3) throw Error(fmt(repr(), ": expected an image (C, H, W), got ", shape_str(img.shape())));
    int64_t h = h_, w = w_;
    if (edge_ > 0) {
        const int64_t H = img.size(1), W = img.size(2);
        if (W <= H) {
            w = edge_;
            h = edge_ * H / W;
        } else {
            h = edge_;
            w = edge_ * W / H;
        }
    }
    if (h == img.size(1) && w == img.size(2)) return img;   // same size: bilinear would give the input back
    return resize_bilinear(img, h, w);
}

std::string Resize::repr() const {
    return edge_ > 0 ? fmt("Resize(size=", edge_, ")") : fmt("Resize(size=(", h_, ", ", w_, "))");
}

Tensor ToFloat::operator()(const Tensor& img, Generator&) const { return to_float(img); }

Normalize::Normalize(std::vector<float> mean, std::vector<float> std) : mean_(std::move(mean)), std_(std::move(std)) {
    if (mean_.empty() || mean_.size() != std_.size())
        throw Error(fmt("Normalize: expected as many mean as std values (one per channel), got ", mean_.size(),
                        " and ", std_.size()));
    for (size_t c = 0; c < std_.size(); ++c)
        if (!(std_[c] > 0.f)) throw Error(fmt("Normalize: std[", c, "] = ", std_[c], "; expected > 0"));
}

Tensor Normalize::operator()(const Tensor& img, Generator&) const { return normalize(img, mean_, std_); }

std::string Normalize::repr() const { return "Normalize(mean=" + list_str(mean_) + ", std=" + list_str(std_) + ")"; }

TransformPtr compose(std::vector<TransformPtr> transforms) { return std::make_shared<Compose>(std::move(transforms)); }
TransformPtr random_crop(int64_t size, int64_t padding) { return std::make_shared<RandomCrop>(size, size, padding); }
TransformPtr random_horizontal_flip(float p) { return std::make_shared<RandomHorizontalFlip>(p); }
TransformPtr resize(int64_t h, int64_t w) { return std::make_shared<Resize>(h, w); }
TransformPtr to_float_transform() { return std::make_shared<ToFloat>(); }
TransformPtr normalize_transform(std::vector<float> mean, std::vector<float> std) {
    return std::make_shared<Normalize>(std::move(mean), std::move(std));
}

}  // namespace razor::data
