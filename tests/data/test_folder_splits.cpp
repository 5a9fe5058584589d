// tests/data/test_folder_splits.cpp -- image folders as users have them: images of any size (on disk, each decoded
// at its own size), val/ and test/ splits or a stratified seeded --val-split, class folders checked across splits,
// the resolution and eval crop load_splits picks, and checkpoint metadata's class names.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/core.h"
#include "data/image_folder.h"
#include "data/test_support.h"
#include "data/val_split.h"
#include "train/data_splits.h"

using namespace razor;
using doctest::Contains;

namespace {
// ROOT/<split>/<class>/<i>.png of the given (H, W) sizes, cycling through `sizes`.
void write_split(const test::TempDir& root, const std::string& split, const std::vector<std::string>& classes, int per_class,
                 const std::vector<std::pair<int, int>>& sizes) {
    int k = 0;
    for (const std::string& c : classes)
        for (int i = 0; i < per_class; ++i, ++k) {
            const auto [h, w] = sizes[k % sizes.size()];
            test::write_bytes(root / (split + "/" + c + "/" + std::to_string(i) + ".png"),
                              test::encode_png(test::pattern_image(3, h, w, k), 3, h, w));
        }
}
const std::vector<std::pair<int, int>> kMixed = {{20, 14}, {9, 23}, {16, 16}};
}  // namespace

TEST_CASE("image folder: any_size keeps every image at its own size (on disk), one size is still reported") {
    test::TempDir root("imgf_any");
    write_split(root, "train", {"ant", "bee"}, 3, kMixed);
    data::ImageFolderOptions o;
    o.in_memory = false, o.any_size = true;
    const data::ImageDataset ds = data::load_image_folder(root.path(), "train", o);
    CHECK(ds.image_shape() == Shape{3, 0, 0});   // sizes vary
    CHECK(ds.image(0).shape() == Shape{3, 20, 14});
    CHECK(ds.image(1).shape() == Shape{3, 9, 23});
    CHECK(ds.image(5).shape() == Shape{3, 16, 16});
    data::ImageFolderOptions strict;
    strict.in_memory = false;   // without any_size, every image must have the first one's size (as before)
    CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train", strict), Contains("expected (3, 20, 14)"), Error);
    o.in_memory = true;
    CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train", o), Contains("any_size needs in_memory = false"), Error);
}

TEST_CASE("split_train_val: stratified, disjoint, reproducible from the seed, dataset order kept") {
    test::TempDir root("imgf_valsplit");
    write_split(root, "train", {"a", "b", "c"}, 10, {{4, 4}});
    data::ImageFolderOptions o;
    o.in_memory = false;
    const data::ImageDataset ds = data::load_image_folder(root.path(), "train", o);
    const data::TrainValSplit s = data::split_train_val(ds, 0.2, 7);
    CHECK(s.train.size() == 24);
    CHECK(s.val.size() == 6);
    CHECK(data::class_counts(s.val) == std::vector<int64_t>{2, 2, 2});   // every class keeps its share
    std::set<std::string> all(s.train.files.begin(), s.train.files.end());
    for (const std::string& f : s.val.files) CHECK(all.insert(f).second);   // disjoint
    CHECK(all.size() == 30);
    CHECK(std::is_sorted(s.val.files.begin(), s.val.files.end()));
    CHECK(data::split_train_val(ds, 0.2, 7).val.files == s.val.files);   // same seed, same split
    CHECK(data::split_train_val(ds, 0.2, 8).val.files != s.val.files);
    CHECK(s.val.classes == ds.classes);
    // a class of one image stays in train; a tiny fraction still gives each larger class one val image
    CHECK(data::class_counts(data::split_train_val(ds, 0.01, 0).val) == std::vector<int64_t>{1, 1, 1});
    CHECK_THROWS_WITH_AS(data::split_train_val(ds, 1.0, 0), Contains("the validation fraction must be in (0, 1), got 1"), Error);
}

TEST_CASE("load_splits(folder): train/val/test, mixed sizes, resolution and crop defaults, errors with hints") {
    test::TempDir root("imgf_splits");
    write_split(root, "train", {"ant", "bee"}, 4, kMixed);
    write_split(root, "test", {"ant", "bee"}, 2, kMixed);
    train::DataSplits s = train::load_splits("razor train", "folder", root.path(), train::SplitOptions{});
    CHECK(s.train.size() == 8);
    CHECK(s.val.size() == 0);
    CHECK(&s.eval_set() == &s.test);
    CHECK(s.image_size == 224);          // sizes differ: the ImageNet resolution
    CHECK(s.crop_pct == 0.875);
    CHECK(s.mean.size() == 3);
    CHECK(s.dir == std::filesystem::absolute(root.path()).lexically_normal().string());
    // --val-split carves val from train; best/ is then chosen on val
    train::SplitOptions o;
    o.val_split = 0.25, o.image_size = 12, o.mean = {0.5f, 0.5f, 0.5f}, o.std = {0.2f, 0.2f, 0.2f};
    s = train::load_splits("razor train", "folder", root.path(), o);
    CHECK(s.train.size() == 6);
    CHECK(s.val.size() == 2);
    CHECK(&s.eval_set() == &s.val);
    CHECK(s.image_size == 12);
    CHECK(s.mean == std::vector<float>{0.5f, 0.5f, 0.5f});
    // eval: no train/ needed, the checkpoint's class names pick and order the classes
    o = {};
    o.need_train = false, o.class_names = {"bee"}, o.mean = {0.5f, 0.5f, 0.5f}, o.std = {0.2f, 0.2f, 0.2f};
    s = train::load_splits("razor eval", "folder", root.path(), o);
    CHECK(s.train.size() == 0);
    CHECK(s.test.classes == std::vector<std::string>{"bee"});
    CHECK(s.test.size() == 2);
    // one square size: that is the default resolution
    test::TempDir square("imgf_square");
    write_split(square, "train", {"x", "y"}, 2, {{10, 10}});
    write_split(square, "val", {"x", "y"}, 1, {{10, 10}});
    CHECK(train::load_splits("razor train", "folder", square.path(), train::SplitOptions{}).image_size == 10);

    // errors
    train::SplitOptions carve;
    carve.val_split = 0.1;
    CHECK_THROWS_WITH_AS(train::load_splits("razor train", "folder", square.path(), carve),
                         Contains("both give a validation split; hint: drop --val-split or the val/ folder"), Error);
    test::TempDir only("imgf_only_train");
    write_split(only, "train", {"x"}, 2, {{4, 4}});
    CHECK_THROWS_WITH_AS(train::load_splits("razor train", "folder", only.path(), train::SplitOptions{}),
                         Contains("has neither val/ nor test/"), Error);
    CHECK_THROWS_WITH_AS(train::load_splits("razor train", "folder", only.path(), train::SplitOptions{}),
                         Contains("hint: --val-split 0.1"), Error);
    write_split(only, "test", {"x", "z"}, 1, {{4, 4}});
    CHECK_THROWS_WITH_AS(train::load_splits("razor train", "folder", only.path(), train::SplitOptions{}),
                         Contains("has the class folders (x, z)"), Error);
    CHECK_THROWS_WITH_AS(train::load_splits("razor train", "cifar10", only.path(), carve),
                         Contains("--val-split 0.1 needs --dataset folder"), Error);
}

TEST_CASE("checkpoint metadata: class names round-trip, also with commas; older checkpoints' comma list") {
    train::DataSplits s;
    s.train.classes = {"a,b", "c"};
    s.train.num_classes = 2;
    s.train.images = Tensor::zeros({1, 3, 4, 4}, DType::U8);
    s.train.labels = Tensor::from_vector_i64({1}, {0});
    s.mean = {0.1f, 0.2f, 0.3f}, s.std = {1.f, 1.f, 1.f}, s.image_size = 4;
    const auto meta = train::model_metadata("resnet20", "folder", s);
    CHECK(train::metadata_class_names(meta) == s.train.classes);
    CHECK(meta.at("normalize_mean") == "0.1,0.2,0.3");   // shortest text that reads back exactly
    CHECK(train::metadata_class_names({{"classes", "cat,dog"}}) == std::vector<std::string>{"cat", "dog"});
    CHECK(train::metadata_class_names({}).empty());
    CHECK_THROWS_WITH_AS(train::metadata_class_names({{"class_names", "{\"a\": 1}"}}), Contains("JSON array of strings"), Error);
}
