// tests/fuzz/fuzz_cifar.cpp -- libFuzzer target: bytes -> data::parse_cifar_records. The first byte picks the
// layout (CIFAR-10, CIFAR-100 fine, CIFAR-100 coarse); the rest is the file. Accepted input must give one image
// and one in-range label per record.
#include "data/cifar.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    if (size < 1) return 0;
    static const data::CifarRecords kLayouts[3] = {{{10}, 0}, {{20, 100}, 1}, {{20, 100}, 0}};
    const data::CifarRecords& layout = kLayouts[data[0] % 3];
    const std::string in = fuzz::bytes(data + 1, size - 1);
    data::ImageDataset ds;
    if (!fuzz::accepts([&] { ds = data::parse_cifar_records(in, "fuzz.bin", layout); })) return 0;
    const int64_t record = static_cast<int64_t>(layout.label_classes.size()) + data::kCifarImageBytes;
    const int64_t n = static_cast<int64_t>(in.size()) / record;
    fuzz::require(ds.images.shape() == Shape{n, 3, 32, 32} && ds.labels.shape() == Shape{n}, "one image per record");
    for (int64_t i = 0; i < n; ++i)
        fuzz::require(ds.labels.i64()[i] >= 0 && ds.labels.i64()[i] < ds.num_classes, "labels in range");
    return 0;
}
