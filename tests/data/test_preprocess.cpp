// tests/data/test_preprocess.cpp -- the torchvision-style preprocessing: antialiased bilinear/bicubic resize and the
// eval transform against torchvision 0.14 (tests/fixtures/data_resize_aa.safetensors from
// scripts/fixtures/ops_preprocess.py), RandomResizedCrop's window procedure, centre crop offsets, the train/eval
// pipelines of a Preprocess.
#include <cmath>
#include <set>

#include "data/center_crop.h"
#include "data/functional.h"
#include "data/preprocess.h"
#include "data/random_resized_crop.h"
#include "support/gradcheck.h"

using namespace razor;
using doctest::Contains;

namespace {
// u8 results: equal, or 1 apart where the float value lies within rounding error of a .5 tie (at most 2% of pixels).
void check_u8_close(const Tensor& got, const Tensor& expect, const std::string& what) {
    REQUIRE(got.dtype() == DType::U8);
    REQUIRE(got.shape() == expect.shape());
    int64_t differ = 0, worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
        const int64_t d = std::abs(int64_t{got.data<uint8_t>()[i]} - int64_t{expect.data<uint8_t>()[i]});
        differ += d != 0;
        worst = std::max(worst, d);
    }
    INFO(what << ": " << differ << " of " << got.numel() << " pixels differ, worst by " << worst);
    CHECK(worst <= 1);
    CHECK(differ * 50 <= got.numel());
}
}  // namespace

// Tolerance: f32 within 2e-6 absolute of PyTorch on [0, 1) inputs (the same weights in float; only the summation
// order may differ).
TEST_CASE("resize_antialias matches torchvision Resize(antialias=True): bilinear and bicubic, down and up") {
    SafeTensors fx = test::load_fixture("data_resize_aa");
    auto& t = fx.tensors;
    for (const char* name : {"down", "strong", "up", "width_only"})
        for (const auto& [mode, m] : {std::pair{"bilinear", data::Interpolation::Bilinear},
                                      std::pair{"bicubic", data::Interpolation::Bicubic}}) {
            const Tensor& x = t[std::string(name) + ".x"];
            const Tensor& expect = t[std::string(name) + "." + mode];
            const Tensor got = data::resize_antialias(x, expect.size(1), expect.size(2), m);
            test::check_close(got, expect, 0, 2e-6, std::string("resize_antialias ") + name + " " + mode);
        }
    // 37x23 -> 16x11 on a u8 image (torchvision interpolates in float and rounds back)
    check_u8_close(data::resize_antialias(t["u8.x"], 11, 16, data::Interpolation::Bilinear), t["u8.bilinear"], "u8 bilinear");
    check_u8_close(data::resize_antialias(t["u8.x"], 11, 16, data::Interpolation::Bicubic), t["u8.bicubic"], "u8 bicubic");
    // the eval transform: Resize(9) + CenterCrop(8) = crop_pct 0.875 at 8 px
    Generator gen(0);
    const data::ResizeCenterCrop eval(8, 0.875, data::Interpolation::Bicubic);
    CHECK(eval.resize_size() == 9);
    check_u8_close(eval(t["eval.x"], gen), t["eval.bicubic"], "eval Resize(9) + CenterCrop(8)");
    // antialiasing averages: a 1-pixel checkerboard shrunk 4x is flat grey, not a sample of it
    Tensor board = Tensor::empty({1, 16, 16}, DType::U8);
    for (int64_t i = 0; i < 256; ++i) board.data<uint8_t>()[i] = ((i / 16 + i % 16) % 2) ? 200 : 0;
    const Tensor small = data::resize_antialias(board, 4, 4, data::Interpolation::Bilinear);
    for (int64_t i = 0; i < 16; ++i) CHECK(std::abs(int(small.data<uint8_t>()[i]) - 100) <= 8);
    CHECK_THROWS_WITH_AS(data::resize_antialias(board, 0, 4, data::Interpolation::Bilinear),
                         Contains("resize_antialias: expected an output size >= 1x1, got 0x4"), Error);
    CHECK_THROWS_WITH_AS(data::parse_interpolation("nearest", "--interpolation"),
                         Contains("--interpolation: expected bilinear or bicubic, got 'nearest'"), Error);
}

TEST_CASE("center_crop: torchvision's offsets (round half to even) and zero padding when the image is smaller") {
    Tensor img = Tensor::empty({1, 5, 8}, DType::U8);
    for (int64_t i = 0; i < 40; ++i) img.data<uint8_t>()[i] = static_cast<uint8_t>(i + 1);
    // H 5 -> 2: round(1.5) = 2; W 8 -> 5: round(1.5) = 2; W 8 -> 7: round(0.5) = 0
    Tensor a = data::center_crop(img, 2, 5);
    CHECK(a.data<uint8_t>()[0] == 2 * 8 + 2 + 1);
    CHECK(data::center_crop(img, 5, 7).data<uint8_t>()[0] == 1);
    // larger: 5 -> 8 pads (8 - 5) / 2 = 1 row above
    Tensor b = data::center_crop(img, 8, 8);
    CHECK(b.data<uint8_t>()[0] == 0);
    CHECK(b.data<uint8_t>()[8] == 1);
    // the shorter side: 5x8 -> 10x16, 8x5 -> 16x10 (int(size * long / short))
    CHECK(data::resize_shorter_side(img, 10, data::Interpolation::Bilinear).shape() == Shape{1, 10, 16});
    CHECK(data::resize_shorter_side(img, 3, data::Interpolation::Bilinear).shape() == Shape{1, 3, 4});
}

TEST_CASE("RandomResizedCrop: torchvision's window procedure, the centre fallback, determinism") {
    Generator gen(7);
    std::set<int64_t> heights, tops;
    for (int i = 0; i < 400; ++i) {
        const data::CropWindow c = data::random_resized_crop_window(60, 80, 0.08f, 1.f, 0.75f, 4.f / 3.f, gen);
        REQUIRE(c.h >= 1);
        REQUIRE(c.top >= 0);
        REQUIRE(c.top + c.h <= 60);
        REQUIRE(c.left + c.w <= 80);
        const double area = double(c.h) * c.w / (60.0 * 80.0), aspect = double(c.w) / c.h;
        CHECK(area >= 0.06);                  // scale 0.08 up to rounding of both sides
        CHECK(aspect >= 0.70);
        CHECK(aspect <= 1.42);
        heights.insert(c.h), tops.insert(c.top);
    }
    CHECK(heights.size() > 20);   // sizes and positions vary
    CHECK(tops.size() > 20);
    // scale above 1 never fits: 10 attempts, then the centre fallback clamps the aspect into ratio
    Generator g2(1);
    data::CropWindow wide = data::random_resized_crop_window(10, 40, 2.f, 3.f, 0.75f, 4.f / 3.f, g2);
    CHECK(wide.h == 10);
    CHECK(wide.w == 13);             // round(10 * 4/3)
    CHECK(wide.left == (40 - 13) / 2);
    data::CropWindow tall = data::random_resized_crop_window(40, 10, 2.f, 3.f, 0.75f, 4.f / 3.f, g2);
    CHECK(tall.w == 10);
    CHECK(tall.h == 13);             // round(10 / (3/4))
    CHECK(tall.top == 13);
    data::CropWindow fits = data::random_resized_crop_window(30, 36, 2.f, 3.f, 0.75f, 4.f / 3.f, g2);
    CHECK((fits.h == 30 && fits.w == 36 && fits.top == 0 && fits.left == 0));
    // the transform: size x size, u8 kept, same generator seed -> same output
    Tensor img = Tensor::empty({3, 50, 70}, DType::U8);
    for (int64_t i = 0; i < img.numel(); ++i) img.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7);
    const data::RandomResizedCrop rrc(24, data::Interpolation::Bicubic);
    Generator s1(3), s2(3);
    const Tensor x = rrc(img, s1), y = rrc(img, s2);
    CHECK(x.shape() == Shape{3, 24, 24});
    CHECK(x.dtype() == DType::U8);
    CHECK(x.to_string(100000) == y.to_string(100000));
    CHECK(rrc.repr().find("RandomResizedCrop(size=(24, 24), scale=(0.08, 1)") == 0);
    CHECK_THROWS_WITH_AS(data::RandomResizedCrop(24, data::Interpolation::Bilinear, 0.5f, 0.1f), Contains("scale"), Error);
}

TEST_CASE("Preprocess: train and eval pipelines give normalised f32 images of the training size from any size") {
    data::Preprocess p;
    p.image_size = 16;
    p.mean = {0.5f, 0.5f, 0.5f}, p.std = {0.25f, 0.25f, 0.25f};
    Tensor img = Tensor::empty({3, 21, 34}, DType::U8);
    for (int64_t i = 0; i < img.numel(); ++i) img.data<uint8_t>()[i] = static_cast<uint8_t>(i * 3);
    for (data::Augment a : {data::Augment::ResizedCropFlip, data::Augment::CropFlip, data::Augment::None}) {
        Generator gen(5);
        const Tensor x = (*data::train_transform(p, a))(img, gen);
        CHECK(x.shape() == Shape{3, 16, 16});
        CHECK(x.dtype() == DType::F32);
        CHECK(data::parse_augment(data::augment_name(a), "--augment") == a);
    }
    Generator gen(0);
    const Tensor e = (*data::eval_transform(p))(img, gen);   // Resize(18) -> 18x29, CenterCrop(16)
    CHECK(e.shape() == Shape{3, 16, 16});
    const Tensor by_hand = data::normalize(data::to_float(data::center_crop(
        data::resize_antialias(img, 18, 29, data::Interpolation::Bilinear), 16, 16)), p.mean, p.std);
    CHECK(e.to_vector() == by_hand.to_vector());
    // crop+flip at the training size is torchvision's RandomCrop(size, 4) + flip: the same draws as before
    Tensor native = Tensor::empty({3, 16, 16}, DType::U8);
    for (int64_t i = 0; i < native.numel(); ++i) native.data<uint8_t>()[i] = static_cast<uint8_t>(i);
    Generator g1(9), g2(9);
    const Tensor old = (*data::compose({data::random_crop(16, 4), data::random_horizontal_flip(), data::to_float_transform(),
                                        data::normalize_transform(p.mean, p.std)}))(native, g1);
    CHECK(old.to_vector() == (*data::train_transform(p, data::Augment::CropFlip))(native, g2).to_vector());
    CHECK_THROWS_WITH_AS(data::parse_augment("mixup", "--augment"), Contains("crop+flip | rrc+flip | none"), Error);
}
