// tests/data/test_transforms.cpp -- crop/pad offsets, flip, ToFloat + Normalize values, bilinear resize against
// PyTorch (tests/fixtures/data_*.safetensors from scripts/fixtures/ops_data.py), Compose and errors.
#include <set>

#include "data/functional.h"
#include "data/transforms.h"
#include "support/gradcheck.h"

using namespace razor;
using doctest::Contains;

namespace {
// (C, H, W) u8 with value c * 100 + y * 10 + x: every pixel says where it came from.
Tensor coded_image(int64_t C, int64_t H, int64_t W) {
    Tensor t = Tensor::empty({C, H, W}, DType::U8);
    for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < H; ++y)
            for (int64_t x = 0; x < W; ++x) t.data<uint8_t>()[(c * H + y) * W + x] = static_cast<uint8_t>(c * 100 + y * 10 + x);
    return t;
}
int at(const Tensor& t, int64_t c, int64_t y, int64_t x) {
    return t.data<uint8_t>()[(c * t.size(1) + y) * t.size(2) + x];
}
}  // namespace

TEST_CASE("crop: windows inside, overlapping and outside the image; zero padding") {
    const Tensor img = coded_image(2, 5, 6);
    Tensor inside = data::crop(img, 1, 2, 3, 4);
    CHECK(inside.shape() == Shape{2, 3, 4});
    CHECK(at(inside, 0, 0, 0) == 12);
    CHECK(at(inside, 1, 2, 3) == 100 + 35);
    // top-left padding: window starts at (-2, -1)
    Tensor tl = data::crop(img, -2, -1, 4, 4);
    for (int64_t x = 0; x < 4; ++x) CHECK(at(tl, 0, 0, x) == 0);
    CHECK(at(tl, 0, 2, 0) == 0);            // column -1
    CHECK(at(tl, 0, 2, 1) == 0 * 10 + 0);   // (0, 0)
    CHECK(at(tl, 1, 3, 3) == 100 + 12);     // (1, 2)
    // bottom-right padding
    Tensor br = data::crop(img, 3, 4, 4, 4);
    CHECK(at(br, 0, 0, 0) == 34);
    CHECK(at(br, 0, 1, 1) == 45);
    CHECK(at(br, 0, 0, 2) == 0);
    CHECK(at(br, 0, 2, 0) == 0);
    // entirely outside
    Tensor out = data::crop(img, 10, -20, 2, 3);
    for (uint8_t v : std::vector<uint8_t>(out.data<uint8_t>(), out.data<uint8_t>() + out.numel())) CHECK(v == 0);
    // f32 too, and a view input (a row of a batch)
    Tensor f = data::to_float(img);
    Tensor fc = data::crop(f, -1, -1, 7, 8);
    CHECK(fc.f32()[0] == 0.f);
    CHECK(fc.f32()[1 * 8 + 1] == 0.f / 255.f);
    CHECK(fc.f32()[2 * 8 + 3] == doctest::Approx(12 / 255.f));
    CHECK_THROWS_WITH_AS(data::crop(Tensor::zeros({4, 4}), 0, 0, 2, 2), Contains("crop: expected an image (C, H, W), got (4, 4)"), Error);
}

TEST_CASE("RandomCrop(32, padding=4): every offset 0..8 occurs, content matches the padded image") {
    const Tensor img = coded_image(3, 32, 32);
    data::RandomCrop rc(32, 32, 4);
    std::set<std::pair<int64_t, int64_t>> seen;
    Generator gen(5);
    for (int i = 0; i < 2000; ++i) {
        Generator probe = gen;   // replay the draws RandomCrop makes: top, then left
        const int64_t top = static_cast<int64_t>(probe.randint(9)), left = static_cast<int64_t>(probe.randint(9));
        Tensor out = rc(img, gen);
        CHECK(gen.state() == probe.state());
        REQUIRE(out.shape() == Shape{3, 32, 32});
        seen.insert({top, left});
        // pixel (y, x) of the crop is pixel (y + top - 4, x + left - 4) of the image, or 0 outside it
        for (int64_t y : {0, 3, 4, 31})
            for (int64_t x : {0, 4, 30}) {
                const int64_t sy = y + top - 4, sx = x + left - 4;
                const int expect = (sy < 0 || sy >= 32 || sx < 0 || sx >= 32) ? 0 : at(img, 2, sy, sx);
                CHECK(at(out, 2, y, x) == expect);
            }
    }
    CHECK(seen.size() == 81);
    // a crop the size of the padded image draws nothing
    data::RandomCrop whole(40, 40, 4);
    Generator g1(1), g2(1);
    CHECK(whole(img, g1).shape() == Shape{3, 40, 40});
    CHECK(g1.state() == g2.state());
    CHECK_THROWS_WITH_AS(data::RandomCrop(33, 33)(img, g1), Contains("smaller than the 33x33 crop"), Error);
    CHECK_THROWS_WITH_AS(data::RandomCrop(0, 4), Contains("RandomCrop: expected size >= 1"), Error);
}

TEST_CASE("hflip and RandomHorizontalFlip(p)") {
    const Tensor img = coded_image(2, 3, 4);
    Tensor f = data::hflip(img);
    CHECK(at(f, 0, 0, 0) == 3);
    CHECK(at(f, 1, 2, 3) == 120);
    CHECK(data::hflip(f).to_string(100) == img.to_string(100));
    Generator gen(3);
    int flipped = 0;
    data::RandomHorizontalFlip half(0.5f);
    for (int i = 0; i < 1000; ++i) flipped += at(half(img, gen), 0, 0, 0) == 3;
    CHECK(flipped > 440);
    CHECK(flipped < 560);
    data::RandomHorizontalFlip never(0.f), always(1.f);
    CHECK(at(never(img, gen), 0, 0, 0) == 0);
    CHECK(at(always(img, gen), 0, 0, 0) == 3);
    CHECK_THROWS_WITH_AS(data::RandomHorizontalFlip(1.5f), Contains("expected p in [0, 1], got 1.5"), Error);
}

TEST_CASE("ToFloat + Normalize match torchvision (ToTensor, Normalize) exactly") {
    SafeTensors fx = test::load_fixture("data_normalize");
    auto& t = fx.tensors;
    const std::vector<float> mean = t["mean"].to_vector(), std = t["std"].to_vector();
    Tensor f = data::to_float(t["x"]);
    test::check_close(f, t["float"], 0, 0, "to_float");
    test::check_close(data::normalize(f, mean, std), t["out"], 0, 0, "normalize");
    Generator gen(0);
    Tensor composed = data::Compose({data::to_float_transform(), data::normalize_transform(mean, std)})(t["x"], gen);
    test::check_close(composed, t["out"], 0, 0, "Compose(ToFloat, Normalize)");
    CHECK_THROWS_WITH_AS(data::normalize(t["x"], mean, std), Contains("hint: put ToFloat() before Normalize"), Error);
    CHECK_THROWS_WITH_AS(data::normalize(f, {0.5f}, {0.5f}), Contains("expected 3 mean and std values"), Error);
    CHECK_THROWS_WITH_AS(data::Normalize({0.5f}, {0.f}), Contains("std[0] = 0; expected > 0"), Error);
}

// Tolerance: f32 results within 2e-6 absolute of PyTorch on [0, 1) inputs (the same formula; only the order of the
// four products may differ). u8 results are equal, or 1 apart where the float value sits within rounding error of a
// .5 tie; at most 1% of pixels may differ.
TEST_CASE("resize_bilinear matches F.interpolate(bilinear, align_corners=False, antialias=False)") {
    SafeTensors fx = test::load_fixture("data_resize");
    auto& t = fx.tensors;
    for (const char* name : {"down", "up", "mixed", "same", "to1"}) {
        const Tensor& x = t[std::string(name) + ".x"];
        const Tensor& expect = t[std::string(name) + ".out"];
        Tensor got = data::resize_bilinear(x, expect.size(1), expect.size(2));
        test::check_close(got, expect, 0, 2e-6, std::string("resize ") + name);
        // the batched form gives the same
        Tensor batched = data::resize_bilinear(x.as_strided({1, x.size(0), x.size(1), x.size(2)},
                                                            {x.numel(), x.size(1) * x.size(2), x.size(2), 1}, 0),
                                               expect.size(1), expect.size(2));
        CHECK(batched.to_vector() == got.to_vector());
    }
    for (const char* name : {"u8_down", "u8_up"}) {
        const Tensor& x = t[std::string(name) + ".x"];
        const Tensor& expect = t[std::string(name) + ".out"];
        Tensor got = data::resize_bilinear(x, expect.size(1), expect.size(2));
        REQUIRE(got.dtype() == DType::U8);
        int64_t differ = 0, worst = 0;
        for (int64_t i = 0; i < got.numel(); ++i) {
            const int64_t d = std::abs(int64_t{got.data<uint8_t>()[i]} - int64_t{expect.data<uint8_t>()[i]});
            differ += d != 0;
            worst = std::max(worst, d);
        }
        INFO(name << ": " << differ << " of " << got.numel() << " pixels differ");
        CHECK(worst <= 1);
        CHECK(differ * 100 <= got.numel());
    }
    Generator gen(0);
    CHECK(data::Resize(16, 20)(t["up.x"], gen).shape() == Shape{2, 16, 20});
    CHECK(data::Resize(14)(t["up.x"], gen).shape() == Shape{2, 14, 18});       // 7x9: smaller edge 7 -> 14, 9 -> 18
    CHECK(data::Resize(10)(t["down.x"], gen).shape() == Shape{3, 10, 12});     // 37x45: 10, int(10 * 45 / 37) = 12
    CHECK_THROWS_WITH_AS(data::resize_bilinear(t["up.x"], 0, 3), Contains("resize: expected an output size >= 1x1"), Error);
}

TEST_CASE("Compose: order, repr, and the input is never modified") {
    const Tensor img = coded_image(3, 8, 8);
    const std::string before = img.to_string(1000);
    auto tf = data::compose({data::random_crop(6, 1), data::random_horizontal_flip(), data::to_float_transform(),
                             data::normalize_transform({0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f})});
    CHECK(tf->repr() == "Compose(RandomCrop(size=(6, 6), padding=1), RandomHorizontalFlip(p=0.5), ToFloat(), "
                        "Normalize(mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25]))");
    Generator g1(9), g2(9);
    Tensor a = (*tf)(img, g1), b = (*tf)(img, g2);
    CHECK(a.dtype() == DType::F32);
    CHECK(a.shape() == Shape{3, 6, 6});
    CHECK(a.to_vector() == b.to_vector());
    CHECK(img.to_string(1000) == before);
}
