// tests/data/test_loader.cpp -- DataLoader: batching, drop_last, seeded shuffle and augmentation independent of
// thread counts, prefetch shutdown mid-epoch, producer errors re-thrown in order; subset_classes.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <optional>
#include <thread>

#include "core/check.h"
#include "core/runtime.h"
#include "data/functional.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "data/test_support.h"

using namespace razor;
using doctest::Contains;

namespace {
// n images (1, 2, 3) whose every pixel is the image index % 256; label = index % classes.
data::ImageDataset tiny_set(int64_t n, int64_t classes = 4) {
    data::ImageDataset ds;
    ds.name = "tiny";
    ds.num_classes = classes;
    ds.images = Tensor::empty({n, 1, 2, 3}, DType::U8);
    ds.labels = Tensor::empty({n}, DType::I64);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < 6; ++j) ds.images.data<uint8_t>()[i * 6 + j] = static_cast<uint8_t>(i % 256);
        ds.labels.i64()[i] = i % classes;
    }
    for (int64_t c = 0; c < classes; ++c) ds.classes.push_back(fmt("c", c));   // not "c" + to_string: gcc 12 -Wrestrict false positive
    return ds;
}

// All batches of one epoch, flattened: images as float values, labels.
struct EpochData {
    std::vector<float> images;
    std::vector<int64_t> labels;
    std::vector<int64_t> sizes;
    bool operator==(const EpochData&) const = default;
};
EpochData run_epoch(data::DataLoader& loader) {
    EpochData e;
    for (data::Batch& b : loader) {
        const auto v = b.images.to_vector();
        const auto l = b.labels.to_vector_i64();
        e.images.insert(e.images.end(), v.begin(), v.end());
        e.labels.insert(e.labels.end(), l.begin(), l.end());
        e.sizes.push_back(b.labels.size(0));
    }
    return e;
}

// A transform that counts calls, sleeps on images from number `slow_from` on, and throws on image `fail_on` (-1: never).
class Probe final : public data::Transform {
public:
    Probe(int sleep_ms, int fail_on, std::atomic<int>* calls, int slow_from = 0)
        : sleep_ms_(sleep_ms), fail_on_(fail_on), slow_from_(slow_from), calls_(calls) {}
    Tensor operator()(const Tensor& img, Generator&) const override {
        if (calls_) ++*calls_;
        const int value = img.contiguous().data<uint8_t>()[0];
        if (sleep_ms_ && value >= slow_from_) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
        if (value == fail_on_) throw Error(fmt("Probe: refused image ", fail_on_));
        return data::to_float(img);
    }
    std::string repr() const override { return "Probe()"; }

private:
    int sleep_ms_, fail_on_, slow_from_;
    std::atomic<int>* calls_;
};
}  // namespace

TEST_CASE("DataLoader: batches in order, labels follow images, drop_last, len") {
    data::DataLoader loader(tiny_set(10), nullptr, {.batch_size = 4});
    CHECK(loader.size() == 3);
    EpochData e = run_epoch(loader);
    CHECK(e.sizes == std::vector<int64_t>{4, 4, 2});
    CHECK(e.labels == std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1});
    CHECK(e.images[6 * 9] == doctest::Approx(9 / 255.f));   // image 9, ToFloat by default
    data::DataLoader dropping(tiny_set(10), nullptr, {.batch_size = 4, .drop_last = true});
    CHECK(dropping.size() == 2);
    CHECK(run_epoch(dropping).sizes == std::vector<int64_t>{4, 4});
    data::DataLoader exact(tiny_set(8), nullptr, {.batch_size = 4, .drop_last = true});
    CHECK(run_epoch(exact).sizes == std::vector<int64_t>{4, 4});
    // next(): nullopt closes the epoch, the call after starts the next one
    data::DataLoader manual(tiny_set(3), nullptr, {.batch_size = 2, .workers = 0});
    CHECK(manual.next()->labels.size(0) == 2);
    CHECK(manual.next()->labels.size(0) == 1);
    CHECK_FALSE(manual.next().has_value());
    CHECK(manual.epoch() == 0);
    CHECK(manual.next().has_value());
    CHECK(manual.epoch() == 1);
    CHECK(manual.stats().batches == 3);
    CHECK_THROWS_WITH_AS(data::DataLoader(tiny_set(3), nullptr, {.batch_size = 0}), Contains("expected batch_size >= 1"), Error);
    CHECK_THROWS_WITH_AS(data::DataLoader(tiny_set(0), nullptr, {}), Contains("DataLoader(tiny): the dataset is empty"), Error);
}

TEST_CASE("DataLoader: shuffle is a permutation per epoch, new each epoch, reproducible with set_epoch") {
    data::DataLoader loader(tiny_set(50), nullptr, {.batch_size = 8, .shuffle = true, .seed = 7});
    EpochData e0 = run_epoch(loader), e1 = run_epoch(loader);
    std::set<float> firsts;
    for (size_t i = 0; i < e0.images.size(); i += 6) firsts.insert(e0.images[i]);
    CHECK(firsts.size() == 50);   // every image exactly once
    CHECK(e0.images != e1.images);
    loader.set_epoch(1);
    CHECK(run_epoch(loader) == e1);
    data::DataLoader other_seed(tiny_set(50), nullptr, {.batch_size = 8, .shuffle = true, .seed = 8});
    CHECK(run_epoch(other_seed).images != e0.images);
}

TEST_CASE("DataLoader: same seed -> same order and augmentations for any worker and OpenMP thread count") {
    data::ImageDataset ds;
    ds.name = "pattern";
    ds.num_classes = 3;
    const int64_t n = 37;
    ds.images = Tensor::empty({n, 3, 8, 8}, DType::U8);
    ds.labels = Tensor::empty({n}, DType::I64);
    for (int64_t i = 0; i < n; ++i) {
        const auto img = test::pattern_image(3, 8, 8, static_cast<int>(i));
        std::copy(img.begin(), img.end(), ds.images.data<uint8_t>() + i * 192);
        ds.labels.i64()[i] = i % 3;
    }
    auto tf = data::compose({data::random_crop(8, 2), data::random_horizontal_flip(), data::to_float_transform(),
                             data::normalize_transform({0.5f, 0.5f, 0.5f}, {0.2f, 0.2f, 0.2f})});
    const int threads_before = num_threads();
    std::vector<std::vector<EpochData>> runs;
    for (int64_t workers : {0, 1, 3}) {
        set_num_threads(workers == 3 ? 1 : 2);
        data::DataLoader loader(ds, tf, {.batch_size = 5, .shuffle = true, .seed = 11, .workers = workers, .prefetch = 2});
        runs.push_back({run_epoch(loader), run_epoch(loader)});
    }
    set_num_threads(threads_before);
    CHECK(runs[0][0] == runs[1][0]);
    CHECK(runs[0][0] == runs[2][0]);
    CHECK(runs[0][1] == runs[2][1]);
    CHECK(runs[0][0].images != runs[0][1].images);   // a new shuffle and new crops in epoch 1
    CHECK(runs[0][0].sizes.back() == 2);
}

TEST_CASE("DataLoader: prefetch stays bounded and the producer runs ahead of a slow consumer") {
    std::atomic<int> calls{0};
    auto probe = std::make_shared<Probe>(0, -1, &calls);
    data::DataLoader loader(tiny_set(200), probe, {.batch_size = 2, .workers = 1, .prefetch = 3});
    auto first = loader.next();
    REQUIRE(first.has_value());
    // The consumer took batch 0 and now dawdles: the producer runs ahead to batches 1..3 (prefetch 3), 8 images in
    // all, and then waits. Poll (a loaded CI machine may schedule it late), then check it stopped at the bound.
    for (int i = 0; i < 200 && calls.load() < 8; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(calls.load() == 8);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(calls.load() == 8);
    CHECK(loader.next().has_value());
    for (int i = 0; i < 200 && calls.load() < 10; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(calls.load() == 10);   // one batch taken, one more built
}

TEST_CASE("DataLoader: destroying it mid-epoch stops the producers within one image") {
    std::atomic<int> calls{0};
    // Batch 0 (images 0..9) is instant; from image 10 on each image takes 300 ms, so batch 1 alone would take 3 s.
    auto slow = std::make_shared<Probe>(300, -1, &calls, 10);
    std::optional<data::DataLoader> loader;
    loader.emplace(tiny_set(100), slow, data::DataLoaderOptions{.batch_size = 10, .workers = 2, .prefetch = 4});
    REQUIRE(loader->next().has_value());
    for (int i = 0; i < 200 && calls.load() < 12; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const auto t0 = std::chrono::steady_clock::now();
    loader.reset();   // the destructor, mid-epoch
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    // the two producers were each inside a 300 ms image of a 3 s batch: stopping waits for that image only
    CHECK(elapsed < std::chrono::milliseconds(1500));
    CHECK(calls.load() < 20);
    // a new epoch started mid-epoch stops the old one the same way
    data::DataLoader again(tiny_set(40), std::make_shared<Probe>(1, -1, nullptr), {.batch_size = 4, .workers = 2});
    CHECK(again.next().has_value());
    CHECK(run_epoch(again).sizes.size() == 10);
}

TEST_CASE("DataLoader: an error while building batch b is re-thrown when the consumer reaches b") {
    for (int64_t workers : {0, 1, 2}) {
        CAPTURE(workers);
        data::DataLoader loader(tiny_set(20), std::make_shared<Probe>(0, 13, nullptr), {.batch_size = 4, .workers = workers});
        for (int b = 0; b < 3; ++b) CHECK(loader.next().has_value());   // images 0..11
        CHECK_THROWS_WITH_AS(loader.next(), Contains("DataLoader(tiny): image 13: Probe: refused image 13"), Error);
        // the failed epoch is over; the next call starts a new one from the beginning
        auto again = loader.next();
        REQUIRE(again.has_value());
        CHECK(again->labels.i64()[0] == 0);
        CHECK(loader.epoch() == 1);
    }
    // a transform that leaves u8 or changes sizes is named
    data::DataLoader raw(tiny_set(4), data::random_horizontal_flip(), {.batch_size = 2});
    CHECK_THROWS_WITH_AS(raw.next(), Contains("gave a u8 (1, 2, 3) for image 0; expected an f32 image"), Error);
}

TEST_CASE("DataLoader: image files decoded in the producer; a corrupt file's error names it") {
    test::TempDir root("loader_files");
    for (int i = 0; i < 6; ++i)
        test::write_bytes(root / ("train/" + std::string(i < 3 ? "a" : "b") + "/" + std::to_string(i) + ".png"),
                          test::encode_png(test::pattern_image(3, 4, 4, i), 3, 4, 4));
    data::ImageFolderOptions opt;
    opt.in_memory = false;
    data::ImageDataset ds = data::load_image_folder(root.path(), "train", opt);
    data::DataLoader loader(ds, nullptr, {.batch_size = 4, .workers = 1});
    EpochData e = run_epoch(loader);
    CHECK(e.labels == std::vector<int64_t>{0, 0, 0, 1, 1, 1});
    CHECK(e.images[48 * 5 + 1] == doctest::Approx(test::pattern_image(3, 4, 4, 5)[1] / 255.f));
    // corrupt a file after the headers were checked: the error comes through next(), naming the file
    std::string png = test::read_bytes(root / "train/b/4.png");
    const size_t idat = png.find("IDAT");
    for (size_t i = idat + 4; i < png.size() - 12; ++i) png[i] = static_cast<char>(0xA5);
    test::write_bytes(root / "train/b/4.png", png);
    CHECK(loader.next().has_value());
    CHECK_THROWS_WITH_AS(loader.next(), doctest::Contains((root / "train/b/4.png: corrupt image data").c_str()), Error);
}

TEST_CASE("subset_classes: relabelled 0..k-1 in the given order, by index or name") {
    data::ImageDataset ds = tiny_set(12, 4);   // labels 0,1,2,3,0,1,...
    data::ImageDataset sub = data::subset_classes(ds, std::vector<int64_t>{3, 1});
    CHECK(sub.size() == 6);
    CHECK(sub.num_classes == 2);
    CHECK(sub.classes == std::vector<std::string>{"c3", "c1"});
    CHECK(sub.labels.to_vector_i64() == std::vector<int64_t>{1, 0, 1, 0, 1, 0});   // images 1, 3, 5, 7, 9, 11
    CHECK(sub.images.data<uint8_t>()[6] == 3);
    CHECK(sub.images.data<uint8_t>()[5 * 6] == 11);
    CHECK(data::class_counts(sub) == std::vector<int64_t>{3, 3});
    data::ImageDataset by_name = data::subset_classes(ds, std::vector<std::string>{"c3", "c1"});
    CHECK(by_name.labels.to_vector_i64() == sub.labels.to_vector_i64());
    CHECK_THROWS_WITH_AS(data::subset_classes(ds, std::vector<int64_t>{4}), Contains("class 4 is out of range; expected 0..3"), Error);
    CHECK_THROWS_WITH_AS(data::subset_classes(ds, std::vector<int64_t>{1, 1}), Contains("class 1 is listed twice"), Error);
    CHECK_THROWS_WITH_AS(data::subset_classes(ds, std::vector<std::string>{"dog"}),
                         Contains("no class named 'dog'; the classes are: c0, c1, c2, c3"), Error);
    // on-disk sets keep their paths
    test::TempDir root("subset_files");
    for (const char* c : {"x", "y", "z"})
        test::write_bytes(root / ("s/" + std::string(c) + "/0.png"), test::encode_png(test::pattern_image(3, 2, 2, 0), 3, 2, 2));
    data::ImageFolderOptions opt;
    opt.in_memory = false;
    data::ImageDataset files = data::subset_classes(data::load_image_folder(root.path(), "s", opt), std::vector<std::string>{"z", "x"});
    CHECK(files.files == std::vector<std::string>{root / "s/x/0.png", root / "s/z/0.png"});
    CHECK(files.labels.to_vector_i64() == std::vector<int64_t>{1, 0});
    CHECK(files.image(0).shape() == Shape{3, 2, 2});
}
