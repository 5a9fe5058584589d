// data/image_folder.h -- JPEG/PNG image folders (ROOT/SPLIT/CLASS/*.jpg) decoded with stb_image.
//
// reference: torchvision.datasets.ImageFolder: one folder per class, class names sorted, label = index in that
// sorted list; files sorted within a class. docs: docs/data.md "Image folders".
//
// Decoding: Debian's libstb-dev ships stb_image.h with its implementation inside; data/image_decode.cpp compiles it
// once (STB_IMAGE_IMPLEMENTATION, STB_IMAGE_STATIC, JPEG and PNG only), so razor links no stb library.
//
// Checks, each naming the file: the header is read first (stbi_info) and a declared width or height above
// ImageDecode::max_side (default 8192) or a channel count outside 1..4 is refused before any pixel is decoded, so a
// corrupt or hostile header cannot drive a huge allocation; data that fails to decode after a valid header is
// "corrupt image data"; without a resize size every image must have the first image's size, unless any_size.
#pragma once

#include <string>

#include "data/dataset.h"

namespace razor::data {

struct ImageFolderOptions {
    ImageDecode decode;        // channels, resize size (0 = keep, all equal), max_side
    bool in_memory = true;     // true: decode every image now (OpenMP); false: keep the paths (headers checked now)
                               // and decode each image when a DataLoader batch needs it
    bool any_size = false;     // on disk only: images may differ in size (each decodes to its own; the transforms
                               // bring them to one); file_image_shape is (C, H, W) if all agree, else (C, 0, 0)
};

// Reads ROOT/SPLIT/<class>/*.{jpg,jpeg,png} (extension case-insensitive; other files are skipped).
ImageDataset load_image_folder(const std::string& root, const std::string& split, const ImageFolderOptions& options = {});

// What an image header declares.
struct ImageInfo {
    int64_t width = 0, height = 0, channels = 0;
};
// Header check only (no pixels decoded): throws naming `source` when the header is unreadable or over the limits.
ImageInfo read_image_info(const std::string& bytes, const std::string& source, int64_t max_side = 8192);

// Decodes an encoded JPEG/PNG held in `bytes` to (C, H, W) u8 with C = decode.channels, resized to
// decode.height x decode.width when those are set. `expect` (C, H, W), when not empty, is the shape the result
// must have (used when images are not resized). `source` names the file in errors.
Tensor decode_image(const std::string& bytes, const std::string& source, const ImageDecode& decode,
                    const Shape& expect = {});
// The same, reading the file first.
Tensor decode_image_file(const std::string& path, const ImageDecode& decode, const Shape& expect = {});

}  // namespace razor::data
