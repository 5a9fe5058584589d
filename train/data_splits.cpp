// train/data_splits.cpp -- see data_splits.h.
#include "train/data_splits.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/core.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/transforms.h"

namespace razor::train {
namespace fs = std::filesystem;

namespace {

// Per-channel mean and std of pixel / 255 over every training image (image folders have no published statistics).
void measure_stats(const data::ImageDataset& ds, std::vector<float>& mean, std::vector<float>& std) {
    const Shape s = ds.image_shape();   // (C, H, W)
    const int64_t C = s[0], HW = s[1] * s[2], N = ds.size();
    std::vector<double> sum(C, 0), sq(C, 0);
    for (int64_t i = 0; i < N; ++i) {
        const Tensor img = ds.image(i).contiguous();   // (C, H, W) u8
        const uint8_t* p = img.data<uint8_t>();
        for (int64_t c = 0; c < C; ++c)
            for (int64_t k = 0; k < HW; ++k) {
                const double v = p[c * HW + k] / 255.0;
                sum[c] += v, sq[c] += v * v;
            }
    }
    mean.assign(C, 0.f), std.assign(C, 1.f);
    const double n = static_cast<double>(N) * HW;
    for (int64_t c = 0; c < C && n > 0; ++c) {
        const double m = sum[c] / n, var = std::max(sq[c] / n - m * m, 1e-12);
        mean[c] = static_cast<float>(m), std[c] = static_cast<float>(std::sqrt(var));
    }
}

data::ImageDataset keep_classes(const std::string& command, const data::ImageDataset& ds, const std::string& classes) {
    if (classes.empty()) return ds;
    std::vector<std::string> items;
    size_t start = 0;
    while (start <= classes.size()) {
        size_t comma = classes.find(',', start);
        if (comma == std::string::npos) comma = classes.size();
        items.push_back(classes.substr(start, comma - start));
        start = comma + 1;
    }
    bool numeric = true;
    for (const auto& s : items) numeric = numeric && !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    std::set<std::string> seen;
    for (const auto& s : items)
        if (s.empty() || !seen.insert(s).second)
            throw Error(fmt(command, ": --classes '", classes, "': ", s.empty() ? "an empty item" : "'" + s + "' twice",
                            "; hint: a comma-separated list of distinct class indices (2,3,4) or names (cat,dog)"));
    if (!numeric) return data::subset_classes(ds, items);
    std::vector<int64_t> keep;
    for (const auto& s : items) {
        const int64_t k = std::strtoll(s.c_str(), nullptr, 10);
        if (k >= ds.num_classes)
            throw Error(fmt(command, ": --classes '", classes, "': class ", k, " does not exist (", ds.name, " has ",
                            ds.num_classes, " classes, 0..", ds.num_classes - 1, ")"));
        keep.push_back(k);
    }
    return data::subset_classes(ds, keep);
}

}  // namespace

DataSplits load_splits(const std::string& command, const std::string& dataset, const std::string& dir_flag,
                       const std::string& classes, bool need_train) {
    DataSplits s;
    std::string dir = dir_flag;
    if (dir.empty() && dataset == "fashion-mnist") dir = data::kFashionMnistDir;
    if (dir.empty())
        throw Error(fmt(command, ": --data is required for --dataset ", dataset,
                        "; hint: --data DIR, the folder holding data_batch_1.bin (CIFAR-10's binary version, "
                        "cifar-10-batches-bin)"));
    if (!fs::is_directory(dir))
        throw Error(fmt(command, ": --data ", dir, " is not a folder (--dataset ", dataset,
                        "); hint: pass the folder that holds the dataset's files"));
    if (dataset == "cifar10") {
        if (need_train) s.train = data::load_cifar10(dir, true);
        s.test = data::load_cifar10(dir, false);
        s.mean = data::kCifar10Mean, s.std = data::kCifar10Std;
    } else if (dataset == "cifar100") {
        if (need_train) s.train = data::load_cifar100(dir, true);
        s.test = data::load_cifar100(dir, false);
        s.mean = {0.5071f, 0.4865f, 0.4409f}, s.std = {0.2673f, 0.2564f, 0.2762f};   // CIFAR-100 training set
    } else if (dataset == "fashion-mnist") {
        if (need_train) s.train = data::load_fashion_mnist(dir, true);
        s.test = data::load_fashion_mnist(dir, false);
        s.mean = {0.2860f}, s.std = {0.3530f};
    } else if (dataset == "folder") {
        // ROOT/train/CLASS/*.png and ROOT/test/CLASS/*.png, decoded once into memory.
        if (need_train) s.train = data::load_image_folder(dir, "train");
        s.test = data::load_image_folder(dir, "test");
        if (need_train) measure_stats(s.train, s.mean, s.std);
    } else {
        std::string valid;
        for (const auto& n : kDatasetNames) valid += (valid.empty() ? "" : ", ") + n;
        throw Error(fmt(command, ": --dataset must be one of ", valid, "; got '", dataset, "'"));
    }
    if (need_train) s.train = keep_classes(command, s.train, classes);
    s.test = keep_classes(command, s.test, classes);
    if (need_train && s.train.size() == 0)
        throw Error(fmt(command, ": ", s.train.name, " holds no training images", classes.empty() ? "" : " of --classes ",
                        classes, "; hint: check --data and --classes"));
    return s;
}

std::vector<double> parse_number_list(const std::string& command, const std::string& flag, const std::string& text) {
    std::vector<double> out;
    if (text.empty()) return out;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        const std::string item = text.substr(start, comma - start);
        char* end = nullptr;
        const double v = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !std::isfinite(v))
            throw Error(fmt(command, ": --", flag, " expects comma-separated numbers, got '", text, "' (bad item '",
                            item, "')"));
        out.push_back(v);
        start = comma + 1;
    }
    return out;
}

std::string join_floats(const std::vector<float>& v) {
    std::string s;
    for (float x : v) {
        if (!s.empty()) s += ',';
        s += fmt(x);
    }
    return s;
}

data::DataLoader train_loader(const DataSplits& data, bool augment, int64_t batch, int64_t seed, int64_t workers,
                              bool drop_last) {
    const Shape image = data.train.image_shape();   // (C, H, W)
    std::vector<data::TransformPtr> tf;
    if (augment) tf = {data::random_crop(image[1], 4), data::random_horizontal_flip()};
    tf.push_back(data::to_float_transform());
    tf.push_back(data::normalize_transform(data.mean, data.std));
    return data::DataLoader(data.train, data::compose(tf),
                            {.batch_size = batch, .shuffle = true, .drop_last = drop_last,
                             .seed = static_cast<uint64_t>(seed), .workers = workers});
}

std::map<std::string, std::string> model_metadata(const std::string& model, const std::string& dataset,
                                                  const DataSplits& data) {
    const Shape image = data.train.image_shape();
    std::string names;
    for (const auto& n : data.train.classes) names += (names.empty() ? "" : ",") + n;
    return {{"format", "pt"},   // safetensors.torch's marker: plain PyTorch tensors
            {"model", model},
            {"dataset", dataset},
            {"num_classes", fmt(data.train.num_classes)},
            {"in_channels", fmt(image[0])},
            {"image_size", fmt(image[1])},
            {"normalize_mean", join_floats(data.mean)},
            {"normalize_std", join_floats(data.std)},
            {"classes", names}};
}

}  // namespace razor::train
