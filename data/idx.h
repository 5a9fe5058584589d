// data/idx.h -- the IDX format of MNIST / Fashion-MNIST, plain or gzip-compressed.
//
// reference: torchvision.datasets.MNIST's reader; format: yann.lecun.com/exdb/mnist ("IDX"): 2 zero bytes, a type
// byte (0x08 = unsigned byte), the number of dimensions, each dimension as a big-endian uint32, then the data.
//
// Every header field is checked before it drives an allocation: magic, type, rank (1..4), dimensions (product at most
// 1 GiB), and the data length (a truncated file is an error naming the file, the bytes expected and the bytes found).
#pragma once

#include <string>

#include "core/tensor.h"
#include "data/dataset.h"

namespace razor::data {

// Reads an IDX file of unsigned bytes (".gz" is decompressed on the fly) into a U8 tensor of the declared shape.
Tensor read_idx(const std::string& path);
// The same from bytes already in memory (gzip data, starting 1f 8b, is decompressed); `source` names them in errors.
// read_idx and parse_idx share one parser, so fuzzing parse_idx covers the file reader too.
Tensor parse_idx(const std::string& bytes, const std::string& source);

// Fashion-MNIST from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) or another folder holding
// {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. Images come back as (N, 1, 28, 28).
ImageDataset load_fashion_mnist(const std::string& dir, bool train);
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace razor::data
