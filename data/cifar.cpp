// data/cifar.cpp -- CIFAR-10/100 binary reader (see cifar.h).
#include "data/cifar.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/check.h"

namespace razor::data {
namespace fs = std::filesystem;
namespace {

const std::vector<std::string> kCifar10Classes = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                  "dog",      "frog",       "horse", "ship", "truck"};
const std::vector<std::string> kCifar100Coarse = {
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables", "household_electrical_devices",
    "household_furniture", "insects", "large_carnivores", "large_man-made_outdoor_things",
    "large_natural_outdoor_scenes", "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates",
    "people", "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2"};
const std::vector<std::string> kCifar100Fine = {
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle", "bowl", "boy",
    "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle", "chair", "chimpanzee", "clock",
    "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish", "forest",
    "fox", "girl", "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion", "lizard",
    "lobster", "man", "maple_tree", "motorcycle", "mountain", "mouse", "mushroom", "oak_tree", "orange", "orchid",
    "otter", "palm_tree", "pear", "pickup_truck", "pine_tree", "plain", "plate", "poppy", "porcupine", "possum",
    "rabbit", "raccoon", "ray", "road", "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper",
    "snail", "snake", "spider", "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone",
    "television", "tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf",
    "woman", "worm"};

// `dir` itself when it holds `probe`, else dir/subfolder when that does (the layout the official tarball unpacks to).
std::string resolve_dir(const std::string& dir, const std::string& subfolder, const std::string& probe) {
    if (!fs::exists(fs::path(dir) / probe) && fs::exists(fs::path(dir) / subfolder / probe))
        return (fs::path(dir) / subfolder).string();
    return dir;
}

// Every path in `names` under `dir`; throws listing all that are missing.
std::vector<std::string> require_files(const std::string& what, const std::string& dir,
                                       const std::vector<std::string>& names, const std::string& layout) {
    std::vector<std::string> paths, missing;
    for (const std::string& n : names) {
        const std::string p = (fs::path(dir) / n).string();
        (fs::is_regular_file(p) ? paths : missing).push_back(p);
    }
    if (!missing.empty()) {
        std::string list;
        for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
        throw Error(fmt(what, ": missing ", missing.size(), " of ", names.size(), " files: ", list, "; expected ",
                        layout, " in ", dir, "; hint: pass the folder the official binary tarball unpacks to"));
    }
    return paths;
}

// Class names from a names file (one a line), or `fallback` when the file is absent.
std::vector<std::string> class_names(const std::string& path, const std::vector<std::string>& fallback) {
    std::ifstream in(path);
    if (!in) return fallback;
    std::vector<std::string> names;
    for (std::string line; std::getline(in, line);) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (!line.empty()) names.push_back(line);
    }
    if (names.size() != fallback.size())
        throw Error(fmt(path, ": expected ", fallback.size(), " class names (one a line), got ", names.size(),
                        "; hint: wrong folder, or a damaged names file"));
    return names;
}

}  // namespace

namespace {

int64_t label_bytes_of(const CifarRecords& layout) {
    const int64_t label_bytes = static_cast<int64_t>(layout.label_classes.size());
    RAZOR_CHECK(layout.label_index >= 0 && layout.label_index < label_bytes) << "label byte " << layout.label_index;
    return label_bytes;
}

// Records in a file of `bytes` bytes; throws naming `source` unless it holds a non-zero number of whole records.
int64_t record_count(int64_t bytes, const std::string& source, int64_t label_bytes) {
    const int64_t record = label_bytes + kCifarImageBytes;
    if (bytes == 0)
        throw Error(fmt(source, ": empty file; expected records of ", record, " bytes; hint: the download or copy "
                        "was interrupted"));
    if (bytes % record != 0) {
        const int64_t other = label_bytes == 1 ? record + 1 : record - 1;
        const std::string hint = bytes % other == 0
            ? fmt("its size is a multiple of ", other, ": is this a ", label_bytes == 1 ? "CIFAR-100" : "CIFAR-10", " file?")
            : std::string("the file is damaged or incompletely downloaded; fetch it again");
        throw Error(fmt(source, ": truncated: ", bytes, " bytes is not a multiple of ", record, " (one record = ",
                        label_bytes, " label byte", label_bytes > 1 ? "s" : "", " + ",
                        kCifarImageBytes, " pixel bytes); hint: ", hint));
    }
    return bytes / record;
}

// Empty (N, 3, 32, 32) images and (N) labels for `total` records.
ImageDataset allocate(int64_t total, const CifarRecords& layout) {
    ImageDataset ds;
    ds.num_classes = layout.label_classes[layout.label_index];
    ds.images = Tensor::empty({total, 3, 32, 32}, DType::U8);   // (N, C, H, W)
    ds.labels = Tensor::empty({total}, DType::I64);             // (N)
    return ds;
}

// Checks the labels of `n` records in `buffer` (record `first` of `source` is the first) and stores them at `row`.
void store_records(const uint8_t* buffer, int64_t n, int64_t first, const std::string& source,
                   const CifarRecords& layout, ImageDataset& ds, int64_t row) {
    const int64_t label_bytes = static_cast<int64_t>(layout.label_classes.size());
    const int64_t record = label_bytes + kCifarImageBytes;
    uint8_t* images = ds.images.data<uint8_t>();
    int64_t* labels = ds.labels.i64();
    for (int64_t r = 0; r < n; ++r, ++row) {
        const uint8_t* rec = buffer + r * record;
        for (int64_t b = 0; b < label_bytes; ++b)
            if (rec[b] >= layout.label_classes[b])
                throw Error(fmt(source, ": label ", int(rec[b]), " in record ", first + r, " (byte offset ",
                                (first + r) * record + b, ") is out of range; expected 0..",
                                layout.label_classes[b] - 1, "; hint: the file is damaged, or not this dataset"));
        labels[row] = rec[layout.label_index];
        std::memcpy(images + row * kCifarImageBytes, rec + label_bytes, kCifarImageBytes);
    }
}

}  // namespace

ImageDataset read_cifar_files(const std::vector<std::string>& paths, const CifarRecords& layout) {
    const int64_t label_bytes = label_bytes_of(layout);
    const int64_t record = label_bytes + kCifarImageBytes;
    // Sizes first: nothing is allocated or read until every file is known to hold whole records.
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (const std::string& p : paths) {
        std::error_code ec;
        const auto bytes = static_cast<int64_t>(fs::file_size(p, ec));
        if (ec) throw Error(fmt(p, ": cannot read its size (", ec.message(), "); hint: check the path"));
        counts.push_back(record_count(bytes, p, label_bytes));
        total += counts.back();
    }
    ImageDataset ds = allocate(total, layout);
    constexpr int64_t kChunk = 1024;   // records per read: a 3 MiB buffer instead of a copy of the whole file
    std::vector<uint8_t> buffer(kChunk * record);
    int64_t row = 0;
    for (size_t f = 0; f < paths.size(); ++f) {
        std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(paths[f].c_str(), "rb"), &std::fclose);
        if (!file) throw Error(fmt(paths[f], ": cannot open (", std::strerror(errno), ")"));
        for (int64_t first = 0; first < counts[f]; first += kChunk) {
            const int64_t n = std::min(kChunk, counts[f] - first);
            if (static_cast<int64_t>(std::fread(buffer.data(), 1, n * record, file.get())) != n * record)
                throw Error(fmt(paths[f], ": read failed at record ", first, " (", std::strerror(errno),
                                "); hint: the file changed while being read, or the disk is failing"));
            store_records(buffer.data(), n, first, paths[f], layout, ds, row);
            row += n;
        }
    }
    return ds;
}

ImageDataset parse_cifar_records(const std::string& bytes, const std::string& source, const CifarRecords& layout) {
    const int64_t count = record_count(static_cast<int64_t>(bytes.size()), source, label_bytes_of(layout));
    ImageDataset ds = allocate(count, layout);
    store_records(reinterpret_cast<const uint8_t*>(bytes.data()), count, 0, source, layout, ds, 0);
    return ds;
}

ImageDataset load_cifar10(const std::string& dir_in, bool train) {
    const std::string dir = resolve_dir(dir_in, "cifar-10-batches-bin", train ? "data_batch_1.bin" : "test_batch.bin");
    std::vector<std::string> names;
    if (train)
        for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
    else
        names.push_back("test_batch.bin");
    const auto paths = require_files("CIFAR-10", dir, names,
                                     "data_batch_1.bin .. data_batch_5.bin and test_batch.bin (the binary version)");
    ImageDataset ds = read_cifar_files(paths, {.label_classes = {10}, .label_index = 0});
    ds.classes = class_names((fs::path(dir) / "batches.meta.txt").string(), kCifar10Classes);
    ds.name = train ? "cifar10/train" : "cifar10/test";
    return ds;
}

ImageDataset load_cifar100(const std::string& dir_in, bool train, Cifar100Labels which) {
    const std::string file = train ? "train.bin" : "test.bin";
    const std::string dir = resolve_dir(dir_in, "cifar-100-binary", file);
    const auto paths = require_files("CIFAR-100", dir, {file}, "train.bin and test.bin (the binary version)");
    const bool fine = which == Cifar100Labels::Fine;
    ImageDataset ds = read_cifar_files(paths, {.label_classes = {20, 100}, .label_index = fine ? 1 : 0});
    ds.classes = fine ? class_names((fs::path(dir) / "fine_label_names.txt").string(), kCifar100Fine)
                      : class_names((fs::path(dir) / "coarse_label_names.txt").string(), kCifar100Coarse);
    ds.name = std::string("cifar100/") + (train ? "train" : "test") + (fine ? "" : "/coarse");
    return ds;
}

}  // namespace razor::data
