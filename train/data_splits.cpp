// train/data_splits.cpp -- see data_splits.h.
#include "train/data_splits.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/core.h"
#include "data/cifar.h"
#include "data/fetch.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/transforms.h"
#include "data/val_split.h"
#include "train/run_log.h"

namespace razor::train {
namespace fs = std::filesystem;

namespace {

// Per-channel mean and std of pixel / 255 over every training image (image folders have no published statistics).
void measure_stats(const data::ImageDataset& ds, std::vector<float>& mean, std::vector<float>& std) {
    const int64_t C = ds.image_shape()[0], N = ds.size();
    std::vector<double> sum(C, 0), sq(C, 0);
    double n = 0;   // pixels per channel, over every image (each at its own size)
    for (int64_t i = 0; i < N; ++i) {
        const Tensor img = ds.image(i).contiguous();   // (C, H, W) u8
        const int64_t HW = img.size(1) * img.size(2);
        const uint8_t* p = img.data<uint8_t>();
        for (int64_t c = 0; c < C; ++c)
            for (int64_t k = 0; k < HW; ++k) {
                const double v = p[c * HW + k] / 255.0;
                sum[c] += v, sq[c] += v * v;
            }
        n += static_cast<double>(HW);
    }
    mean.assign(C, 0.f), std.assign(C, 1.f);
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

// A folder's split ROOT/<split>, on disk with any image sizes; its class folders must be `expect`'s when given.
data::ImageDataset load_folder_split(const std::string& command, const std::string& dir, const std::string& split,
                                     const data::ImageDataset* expect) {
    data::ImageFolderOptions o;
    o.in_memory = false, o.any_size = true;
    data::ImageDataset ds = data::load_image_folder(dir, split, o);
    if (expect && ds.classes != expect->classes)
        throw Error(fmt(command, ": ", ds.name, " has the class folders ", join_names(ds.classes), ", ", expect->name,
                        " has ", join_names(expect->classes), "; expected the same classes in every split (labels are "
                        "positions in the sorted list); hint: add the missing class folders or remove the extra ones"));
    return ds;
}

// The square size every image of `ds` has, or 0 when they differ or are not square.
int64_t common_square_size(const data::ImageDataset& ds) {
    if (ds.size() == 0) return 0;
    const Shape s = ds.image_shape();
    return s[1] > 0 && s[1] == s[2] ? s[1] : 0;
}

}  // namespace

std::string join_names(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return "(" + s + ")";
}

DataSplits load_splits(const std::string& command, const std::string& dataset, const std::string& dir_flag,
                       const std::string& classes, bool need_train) {
    SplitOptions o;
    o.classes = classes, o.need_train = need_train;
    return load_splits(command, dataset, dir_flag, o);
}

DataSplits load_splits(const std::string& command, const std::string& dataset, const std::string& dir_flag,
                       const SplitOptions& o) {
    DataSplits s;
    std::string dir = dir_flag;
    const bool need_train = o.need_train;
    // No --data: where `razor data fetch` puts the dataset (data/fetch.h), else Debian's Fashion-MNIST.
    if (dir.empty() && dataset != "folder" && fs::is_directory(data::default_dataset_dir(dataset)))
        dir = data::default_dataset_dir(dataset);
    if (dir.empty() && dataset == "fashion-mnist") dir = data::kFashionMnistDir;
    if (dir.empty() && dataset == "folder")
        throw Error(fmt(command, ": --data is required for --dataset folder; hint: --data ROOT, the folder holding "
                        "train/CLASS/*.jpg and val/ or test/"));
    if (dir.empty())
        throw Error(fmt(command, ": --data is required: there is no ", data::default_dataset_dir(dataset),
                        " here (where razor data fetch puts ", dataset, "); hint: razor data fetch ", dataset,
                        ", or --data DIR (", dataset == "cifar100" ? "the folder holding train.bin" :
                        "the folder holding data_batch_1.bin", ")"));
    if (!fs::is_directory(dir))
        throw Error(fmt(command, ": --data ", dir, " is not a folder (--dataset ", dataset,
                        "); hint: pass the folder that holds the dataset's files"));
    s.dir = fs::absolute(dir).lexically_normal().string();
    if (o.val_split != 0 && dataset != "folder")
        throw Error(fmt(command, ": --val-split ", o.val_split, " needs --dataset folder, got ", dataset,
                        "; hint: drop --val-split"));
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
        // ROOT/train/CLASS/*.jpg with ROOT/val/ and/or ROOT/test/, or val carved from train/ by --val-split.
        const bool has_val = fs::is_directory(fs::path(dir) / "val"), has_test = fs::is_directory(fs::path(dir) / "test");
        if (o.val_split != 0 && has_val)
            throw Error(fmt(command, ": --val-split ", o.val_split, " and ", (fs::path(dir) / "val").string(),
                            " both give a validation split; hint: drop --val-split or the val/ folder"));
        if (!has_val && !has_test && o.val_split == 0)
            throw Error(fmt(command, ": ", dir, " has neither val/ nor test/; expected ROOT/train/CLASS/*.jpg with "
                            "ROOT/val/ and/or ROOT/test/; hint: --val-split 0.1 carves a validation split from train/"));
        if (need_train || o.val_split != 0) s.train = load_folder_split(command, dir, "train", nullptr);
        const data::ImageDataset* first = need_train || o.val_split != 0 ? &s.train : nullptr;
        if (has_val) s.val = load_folder_split(command, dir, "val", first);
        if (has_val && !first) first = &s.val;
        if (has_test) s.test = load_folder_split(command, dir, "test", first);
        if (o.val_split != 0) {
            data::TrainValSplit split = data::split_train_val(s.train, o.val_split, o.val_seed);
            s.train = std::move(split.train), s.val = std::move(split.val);
            s.val_split = o.val_split, s.val_seed = o.val_seed;
        }
        if (!need_train) s.train = data::ImageDataset{};
        if (need_train && o.mean.empty()) measure_stats(s.train, s.mean, s.std);
    } else {
        std::string valid;
        for (const auto& n : kDatasetNames) valid += (valid.empty() ? "" : ", ") + n;
        throw Error(fmt(command, ": --dataset must be one of ", valid, "; got '", dataset, "'"));
    }
    if (!o.mean.empty()) s.mean = o.mean, s.std = o.std;
    const auto keep = [&](const data::ImageDataset& ds) {
        if (ds.size() == 0) return ds;
        if (o.classes.empty() && !o.class_names.empty()) return ds.classes == o.class_names ? ds : data::subset_classes(ds, o.class_names);
        return keep_classes(command, ds, o.classes);
    };
    s.train = keep(s.train), s.val = keep(s.val), s.test = keep(s.test);
    if (need_train && s.train.size() == 0)
        throw Error(fmt(command, ": ", s.train.name, " holds no training images", o.classes.empty() ? "" : " of --classes ",
                        o.classes, "; hint: check --data and --classes"));
    // Resolution and the eval crop.
    const data::ImageDataset& some = need_train ? s.train : s.eval_set();
    const int64_t native = common_square_size(some);
    // Sizes taken from the images themselves: the splits must agree, or the test images would be scored at a size
    // the model never trained on (a folder with 32 px train/ and 64 px test/ images).
    if (o.image_size == 0 && need_train && native > 0) {
        for (const data::ImageDataset* split : {&s.val, &s.test}) {
            const int64_t other = common_square_size(*split);
            if (split->size() > 0 && other > 0 && other != native)
                throw Error(fmt(command, ": ", s.train.name, " holds ", native, "x", native, " images but ", split->name,
                                " holds ", other, "x", other, " ones; expected one size for training and evaluation; "
                                "hint: pass --image-size ", native, " to resize every split to it"));
        }
    }
    s.image_size = o.image_size > 0 ? o.image_size : native > 0 ? native : 224;
    s.crop_pct = o.crop_pct ? *o.crop_pct : dataset == "folder" ? 0.875 : 1.0;
    s.interpolation = o.interpolation;
    const int64_t channels = some.size() > 0 ? some.image_shape()[0] : 3;
    if (static_cast<int64_t>(s.mean.size()) != channels || s.std.size() != s.mean.size())
        throw Error(fmt(command, ": normalisation has ", s.mean.size(), " mean and ", s.std.size(), " std values for ",
                        channels, "-channel images; expected one of each per channel; hint: --mean and --std take "
                        "comma-separated lists such as 0.485,0.456,0.406"));
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
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, x);   // the shortest text that reads back as x
        s.append(buf, r.ptr);
    }
    return s;
}

data::DataLoader train_loader(const DataSplits& data, data::Augment augment, int64_t batch, int64_t seed,
                              int64_t workers, bool drop_last) {
    return data::DataLoader(data.train, data::train_transform(data.preprocess(), augment),
                            {.batch_size = batch, .shuffle = true, .drop_last = drop_last,
                             .seed = static_cast<uint64_t>(seed), .workers = workers});
}

data::DataLoader train_loader(const DataSplits& data, bool augment, int64_t batch, int64_t seed, int64_t workers,
                              bool drop_last) {
    return train_loader(data, augment ? data::Augment::CropFlip : data::Augment::None, batch, seed, workers, drop_last);
}

std::map<std::string, std::string> model_metadata(const std::string& model, const std::string& dataset,
                                                  const DataSplits& data) {
    const Shape image = data.train.image_shape();
    std::string names;
    for (const auto& n : data.train.classes) {
        require_utf8(fmt("a class name of ", data.train.name), n,
                     "rename the class (its folder, or its line in the dataset's class list) in UTF-8, or leave it "
                     "out with --classes");
        names += (names.empty() ? "" : ",") + n;
    }
    return {{"format", "pt"},   // safetensors.torch's marker: plain PyTorch tensors
            {"model", model},
            {"dataset", dataset},
            {"data", data.dir},
            {"num_classes", fmt(data.train.num_classes)},
            {"in_channels", fmt(image[0])},
            {"image_size", fmt(data.image_size)},
            {"crop_pct", fmt(data.crop_pct)},
            {"interpolation", data::interpolation_name(data.interpolation)},
            {"normalize_mean", join_floats(data.mean)},
            {"normalize_std", join_floats(data.std)},
            {"classes", names},
            {"class_names", nlohmann::json(data.train.classes).dump()},
            {"val_split", fmt(data.val_split)},
            {"val_seed", fmt(data.val_seed)}};
}

std::vector<std::string> metadata_class_names(const std::map<std::string, std::string>& metadata) {
    if (auto it = metadata.find("class_names"); it != metadata.end() && !it->second.empty()) {
        const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
        if (!j.is_array() || !std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) { return v.is_string(); }))
            throw Error(fmt("checkpoint metadata class_names: expected a JSON array of strings, got '", it->second,
                            "'; hint: the checkpoint was edited or damaged"));
        return j.get<std::vector<std::string>>();
    }
    std::vector<std::string> names;
    if (auto it = metadata.find("classes"); it != metadata.end() && !it->second.empty()) {
        size_t start = 0;
        while (start <= it->second.size()) {
            const size_t comma = std::min(it->second.find(',', start), it->second.size());
            names.push_back(it->second.substr(start, comma - start));
            start = comma + 1;
        }
    }
    return names;
}

}  // namespace razor::train
