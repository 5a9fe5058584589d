// data/cifar.h -- CIFAR-10 and CIFAR-100 in their official binary layout.
//
// reference: torchvision.datasets.CIFAR10 / CIFAR100 (same images, labels and class order; torchvision reads the
// Python pickles, razor reads the "binary version" of the same release). docs: docs/data.md.
//
// Format (www.cs.toronto.edu/~kriz/cifar.html, "binary version"): a file is a run of fixed-size records.
//   CIFAR-10   data_batch_1.bin .. data_batch_5.bin (train), test_batch.bin; record = 1 label byte (0..9) +
//              3072 pixel bytes; batches.meta.txt holds the 10 class names, one a line.
//   CIFAR-100  train.bin, test.bin; record = 1 coarse label byte (0..19) + 1 fine label byte (0..99) + 3072 pixel
//              bytes; coarse_label_names.txt / fine_label_names.txt hold the names.
// The 3072 pixel bytes are the red plane, then green, then blue, each 32x32 row-major: exactly (C, H, W), so a
// record's pixels are copied as they are into images (N, 3, 32, 32).
//
// Checks: every expected file exists (all missing ones are listed at once), its size is a non-zero multiple of the
// record size, every label is in range (the message names the file, the record and its byte offset).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace razor::data {

// Reads CIFAR-10 from `dir` (the folder holding data_batch_*.bin, or its parent holding cifar-10-batches-bin/).
// train: the 5 data batches in order (50000 images); else test_batch.bin (10000 images).
ImageDataset load_cifar10(const std::string& dir, bool train);

// Which of CIFAR-100's two labels becomes `labels`.
enum class Cifar100Labels { Fine, Coarse };
// Reads CIFAR-100 from `dir` (the folder holding train.bin, or its parent holding cifar-100-binary/).
ImageDataset load_cifar100(const std::string& dir, bool train, Cifar100Labels which = Cifar100Labels::Fine);

// Files of records: one label byte per entry of `label_classes` (each must be below its entry), then 3072 pixel
// bytes; label byte `label_index` becomes the label. CIFAR-10: {{10}, 0}; CIFAR-100 fine: {{20, 100}, 1}.
struct CifarRecords {
    std::vector<int64_t> label_classes = {10};
    int64_t label_index = 0;
};
ImageDataset read_cifar_files(const std::vector<std::string>& paths, const CifarRecords& layout);
// The same checks and result for one file's bytes already in memory; `source` names them in errors.
ImageDataset parse_cifar_records(const std::string& bytes, const std::string& source, const CifarRecords& layout);

constexpr int64_t kCifarImageBytes = 3 * 32 * 32;

}  // namespace razor::data
