// data/dataset.h -- an image classification set: u8 images, i64 labels, class names; class subsetting.
//
// reference: torchvision.datasets (CIFAR10, ImageFolder): `classes` lists the class names in label order, labels
// are 0..num_classes-1. docs: docs/data.md.
//
// Two storage modes, one type:
//   in memory   images (N, C, H, W) u8 holds every pixel (CIFAR, Fashion-MNIST, small image folders);
//   on disk     files[i] is decoded (and resized to image_shape) when a batch needs it, in the DataLoader's
//               producer thread (large image folders). See data/image_folder.h.
// Either way image(i) returns one image (C, H, W) u8 and labels(i) its class.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace razor::data {

// How files of an on-disk set are decoded (see decode_image_file in data/image_folder.h).
struct ImageDecode {
    int64_t channels = 3;       // 1 (grey) or 3 (RGB); stb_image converts whatever the file holds
    int64_t height = 0;         // > 0: every image is resized (bilinear) to height x width
    int64_t width = 0;          // 0: every image must already have the size of the first one
    int64_t max_side = 8192;    // header check: a declared width or height above this is refused before decoding
};

struct ImageDataset {
    Tensor images;                        // (N, C, H, W) u8 when in memory; undefined when on disk
    Tensor labels;                        // (N) i64, each in [0, num_classes)
    int64_t num_classes = 0;
    std::vector<std::string> classes;     // class names in label order (may be empty for unnamed sets)
    std::string name;                     // for messages: "cifar10/train", "image-folder:/data/x/train"

    // One path per image for sets read from image files (in memory too, for messages); on-disk sets decode
    // files[i] with `decode` to file_image_shape whenever image(i) is asked for.
    std::vector<std::string> files;
    ImageDecode decode;
    Shape file_image_shape;               // (C, H, W) every decoded file is brought to; (C, 0, 0): sizes vary, each
                                          // image keeps its own (ImageFolderOptions::any_size)

    int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
    bool in_memory() const { return images.defined(); }
    Shape image_shape() const;            // (C, H, W)
    // Image i as (C, H, W) u8: a view into `images` (no copy) or a freshly decoded file.
    Tensor image(int64_t i) const;
};

// The images `rows` of `ds` (indices, in the order given; pixels copied for an in-memory set, paths for an on-disk
// one) with their labels and the same classes; `name` names the result.
ImageDataset select_rows(const ImageDataset& ds, const std::vector<int64_t>& rows, const std::string& name);

// The classes `keep` (old label indices) of `ds`, relabelled 0..k-1 in the order given, every other image dropped.
// Image order is kept. Example: subset_classes(cifar10, {2, 3, 4, 5, 6, 7}) -> the 6 animal classes, bird = 0.
ImageDataset subset_classes(const ImageDataset& ds, const std::vector<int64_t>& keep);
// The same by class name, e.g. {"airplane", "automobile", "ship", "truck"}.
ImageDataset subset_classes(const ImageDataset& ds, const std::vector<std::string>& keep);

// Number of images of each class (length num_classes).
std::vector<int64_t> class_counts(const ImageDataset& ds);

}  // namespace razor::data
