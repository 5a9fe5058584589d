// data/transforms.h -- per-image transforms with torchvision's names and semantics, composable.
//
// reference: torchvision.transforms (RandomCrop, RandomHorizontalFlip, Resize, Normalize, ConvertImageDtype /
// ToTensor, Compose) applied to tensors. docs: docs/data.md "Transforms".
//
// A transform maps one image (C, H, W), u8 or f32, to a new image; it never modifies its input. Random transforms
// draw from the Generator they are handed: the DataLoader gives every image its own generator, seeded from (loader
// seed, epoch, position in the epoch), so augmentations do not depend on which thread builds the batch.
//
//   auto train_tf = data::compose({data::random_crop(32, 4), data::random_horizontal_flip(),
//                                  data::to_float_transform(), data::normalize_transform(mean, std)});
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace razor::data {

class Transform {
public:
    virtual ~Transform() = default;
    // img: (C, H, W) u8 or f32. Returns the transformed image; `gen` is this image's generator.
    virtual Tensor operator()(const Tensor& img, Generator& gen) const = 0;
    virtual std::string repr() const = 0;   // "RandomCrop(size=(32, 32), padding=4)", for logs and errors
};
using TransformPtr = std::shared_ptr<const Transform>;

// Applies transforms in order.
class Compose final : public Transform {
public:
    explicit Compose(std::vector<TransformPtr> transforms);
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override;

private:
    std::vector<TransformPtr> transforms_;
};

// Pads `padding` zeros on every side, then cuts a size_h x size_w window at a uniformly random position
// (top drawn first, then left, each uniform over every valid offset). torchvision: RandomCrop(size, padding),
// fill 0, padding_mode "constant".
class RandomCrop final : public Transform {
public:
    RandomCrop(int64_t size_h, int64_t size_w, int64_t padding = 0);
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override;

private:
    int64_t h_, w_, padding_;
};

// Mirrors the image left-right with probability p (one uniform draw per image: flip when it is < p).
class RandomHorizontalFlip final : public Transform {
public:
    explicit RandomHorizontalFlip(float p = 0.5f);
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override;

private:
    float p_;
};

// Bilinear resize (antialias=False; see resize_bilinear). Resize(h, w) gives exactly h x w; Resize(size) matches the
// smaller edge to `size` and scales the other to keep the aspect ratio (torchvision's int size:
// long = int(size * long / short)).
class Resize final : public Transform {
public:
    Resize(int64_t h, int64_t w);
    explicit Resize(int64_t smaller_edge);
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override;

private:
    int64_t h_ = 0, w_ = 0, edge_ = 0;
};

// u8 -> f32 / 255 (torchvision's ToTensor / ConvertImageDtype(float) on a tensor); f32 passes through.
class ToFloat final : public Transform {
public:
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override { return "ToFloat()"; }
};

// (x - mean[c]) / std[c] on f32 images.
class Normalize final : public Transform {
public:
    Normalize(std::vector<float> mean, std::vector<float> std);
    Tensor operator()(const Tensor& img, Generator& gen) const override;
    std::string repr() const override;

private:
    std::vector<float> mean_, std_;
};

// Shorthands returning shared pointers, for compose({...}).
TransformPtr compose(std::vector<TransformPtr> transforms);
TransformPtr random_crop(int64_t size, int64_t padding = 0);
TransformPtr random_horizontal_flip(float p = 0.5f);
TransformPtr resize(int64_t h, int64_t w);
TransformPtr to_float_transform();
TransformPtr normalize_transform(std::vector<float> mean, std::vector<float> std);

// Per-channel statistics of CIFAR-10's training images (pixel / 255), the values commonly used with Normalize.
inline const std::vector<float> kCifar10Mean = {0.4914f, 0.4822f, 0.4465f};
inline const std::vector<float> kCifar10Std = {0.2470f, 0.2435f, 0.2616f};

}  // namespace razor::data
