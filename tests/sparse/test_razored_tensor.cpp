// tests/sparse/test_razored_tensor.cpp -- the codecs: round trips (fp32 exact, fp16 within rounding, int8 within
// half a step), stored bytes equal to the layout formula, the compressed-form accessors, the dense fp16/int8 codec
// (spec §12 items 7-8), and parity with the reference recipe written by PyTorch (tests/fixtures/backrazor).
#include <bit>
#include <cmath>
#include <cstring>

#include "sparse/back_razor.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::sparse;
using namespace razor::test;

namespace {

uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

bool is_kept(const RazoredTensor& r, int64_t b, int64_t i) {
    return (r.bitmap()[b * r.words_per_sample() + (i >> 6)] >> (i & 63)) & 1u;
}

// §4.2/§4.4 formula: bitmap B * 8 * ceil(n_s / 64) + values kept * b_v + offsets 8 (B + 1) + int8 (lo, step) 8 B.
int64_t formula_bytes(int64_t B, int64_t n_s, int64_t kept, ValueCodec codec) {
    return B * 8 * ((n_s + 63) / 64) + kept * value_codec_bytes(codec) + 8 * (B + 1) +
           (codec == ValueCodec::I8 ? 8 * B : 0);
}

}  // namespace

TEST_CASE("razored tensor: fp32 round trip is exact on kept positions and 0 elsewhere") {
    Generator gen(1);
    Tensor x = Tensor::randn({4, 3, 7, 5}, gen);   // n_s = 105: two bitmap words per sample, the second partial
    auto r = RazoredTensor::pack(x, {.ratio = 0.8});
    const Tensor u = r->unpack();
    REQUIRE(u.shape() == x.shape());
    const float* px = x.f32();
    const float* pu = u.f32();
    const int64_t n_s = 105, c = keep_count(n_s, 0.8);
    int64_t bad = 0;
    for (int64_t b = 0; b < 4; ++b) {
        int64_t kept = 0;
        for (int64_t i = 0; i < n_s; ++i) {
            const int64_t f = b * n_s + i;
            if (is_kept(*r, b, i)) ++kept, bad += bits_of(pu[f]) != bits_of(px[f]);
            else bad += bits_of(pu[f]) != 0u;
        }
        CHECK(kept == c);
        CHECK(r->kept(b) == c);
    }
    CHECK(bad == 0);
    CHECK(r->stored_bytes() == formula_bytes(4, n_s, 4 * c, ValueCodec::F32));
    CHECK(r->format() == "bitmap+f32 r=0.80");
    CHECK(r->dense_bytes() == 4 * x.numel());
    CHECK(r->values_f16() == nullptr);
    CHECK(r->qparams() == nullptr);

    // unpack_into a caller's buffer gives the same
    std::vector<float> buf(static_cast<size_t>(x.numel()), 7.f);
    r->unpack_into(buf.data());
    CHECK(std::memcmp(buf.data(), pu, buf.size() * 4) == 0);
}

TEST_CASE("razored tensor: r = 0 with fp32 values is lossless") {
    Generator gen(2);
    Tensor x = Tensor::randn({3, 1000}, gen);
    auto r = RazoredTensor::pack(x, {.ratio = 0.0});
    CHECK(r->total_kept() == 3000);
    CHECK(std::memcmp(r->unpack().f32(), x.f32(), 3000 * 4) == 0);
    // with zeros: zeros are not stored, the reconstruction is still exact
    Tensor h = relu(x);
    auto rh = RazoredTensor::pack(h, {.ratio = 0.0});
    int64_t nnz = 0;
    for (float v : h.to_vector()) nnz += v != 0.f;
    CHECK(rh->total_kept() == nnz);
    CHECK(std::memcmp(rh->unpack().f32(), h.f32(), 3000 * 4) == 0);
    CHECK(rh->stored_bytes() == formula_bytes(3, 1000, nnz, ValueCodec::F32));
}

TEST_CASE("razored tensor: fp16 values equal fp16 rounding of the kept values") {
    Generator gen(3);
    Tensor x = Tensor::randn({5, 333}, gen);
    x.mul_(100.f);
    for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {   // every masker family this CPU runs
        if (!isa_supported(isa)) continue;
        INFO(isa_name(isa));
        auto r = RazoredTensor::pack(x, {.ratio = 0.7, .values = ValueCodec::F16, .isa = isa});
        const Tensor u = r->unpack();
        const float* px = x.f32();
        const float* pu = u.f32();
        int64_t bad = 0;
        for (int64_t f = 0; f < x.numel(); ++f) {
            const bool kept = is_kept(*r, f / 333, f % 333);
            const float expect = kept ? half_bits_to_float(float_to_half_bits(px[f])) : 0.f;
            bad += bits_of(pu[f]) != bits_of(expect);
            if (kept) bad += std::fabs(pu[f] - px[f]) > std::fabs(px[f]) * (1.f / 2048);   // half an fp16 ulp
        }
        CHECK(bad == 0);
        CHECK(r->stored_bytes() == formula_bytes(5, 333, 5 * keep_count(333, 0.7), ValueCodec::F16));
        CHECK(r->format() == "bitmap+f16 r=0.70");
        CHECK(r->values_f16() != nullptr);
    }
}

TEST_CASE("razored tensor: int8 values are within half a quantisation step") {
    Generator gen(4);
    Tensor x = Tensor::randn({6, 2, 100}, gen);
    auto r = RazoredTensor::pack(x, {.ratio = 0.5, .values = ValueCodec::I8});
    const Tensor u = r->unpack();
    const float* px = x.f32();
    const float* pu = u.f32();
    const int64_t n_s = 200;
    int64_t bad = 0;
    for (int64_t b = 0; b < 6; ++b) {
        const float lo = r->qparams()[2 * b], step = r->qparams()[2 * b + 1];
        // lo and step describe exactly the kept values' range
        float mn = INFINITY, mx = -INFINITY;
        for (int64_t i = 0; i < n_s; ++i)
            if (is_kept(*r, b, i)) mn = std::min(mn, px[b * n_s + i]), mx = std::max(mx, px[b * n_s + i]);
        CHECK(lo == mn);
        CHECK(step == doctest::Approx((mx - mn) / 255.f));
        for (int64_t i = 0; i < n_s; ++i) {
            const int64_t f = b * n_s + i;
            if (is_kept(*r, b, i)) bad += std::fabs(pu[f] - px[f]) > 0.5f * step + 1e-6f * std::fabs(px[f]) + 1e-7f;
            else bad += pu[f] != 0.f;
        }
    }
    CHECK(bad == 0);
    CHECK(r->stored_bytes() == formula_bytes(6, n_s, 6 * keep_count(n_s, 0.5), ValueCodec::I8));
    CHECK(r->format() == "bitmap+i8 r=0.50");
    // a sample with one kept value (r = 1) has step 0 and reconstructs exactly
    auto one = RazoredTensor::pack(x, {.ratio = 1.0, .values = ValueCodec::I8});
    CHECK(one->total_kept() == 6);
    CHECK(one->qparams()[1] == 0.f);
}

TEST_CASE("razored tensor: stored bytes equal the layout formula (spec §4.4, §12.8)") {
    Generator gen(5);
    for (const Shape& shape : {Shape{8, 16, 4, 4}, Shape{3, 64}, Shape{2, 65}, Shape{5, 1}, Shape{7}, Shape{}}) {
        Tensor x = Tensor::randn(shape, gen);
        const int64_t B = shape.empty() ? 1 : shape[0];
        const int64_t n_s = x.numel() / B;
        for (ValueCodec codec : {ValueCodec::F32, ValueCodec::F16, ValueCodec::I8}) {
            for (double r : {0.0, 0.9, 1.0}) {
                auto p = RazoredTensor::pack(x, {.ratio = r, .values = codec});
                INFO(shape_str(shape) << " " << value_codec_name(codec) << " r=" << r);
                CHECK(p->batch() == B);
                CHECK(p->sample_numel() == n_s);
                CHECK(p->total_kept() == B * keep_count(n_s, r));
                CHECK(p->stored_bytes() == formula_bytes(B, n_s, B * keep_count(n_s, r), codec));
                CHECK(p->stored_bytes() == RazoredTensor::layout_bytes(B, n_s, p->total_kept(), codec));
                // every sample's popcount equals its offsets segment
                for (int64_t b = 0; b < B; ++b) {
                    int64_t pop = 0;
                    for (int64_t w = 0; w < p->words_per_sample(); ++w)
                        pop += std::popcount(p->bitmap()[b * p->words_per_sample() + w]);
                    CHECK(pop == p->kept(b));
                }
            }
        }
    }
    // The §4.4 ratio at a realistic size: r = 0.9, fp32, n_s = 16*32*32: ~7.6x smaller than dense.
    Tensor big = Tensor::randn({4, 16, 32, 32}, gen);
    auto p = RazoredTensor::pack(big, {.ratio = 0.9});
    const double ratio = static_cast<double>(p->dense_bytes()) / static_cast<double>(p->stored_bytes());
    CHECK(ratio == doctest::Approx(4.0 / (0.1 * 4 + 0.125)).epsilon(0.01));
}

TEST_CASE("razored tensor: a non-contiguous input is packed in logical order") {
    Generator gen(6);
    Tensor k = Tensor::randn({2, 5, 3}, gen);
    Tensor kt = transpose(k, -2, -1);   // (2, 3, 5) view
    REQUIRE(!kt.is_contiguous());
    auto p = RazoredTensor::pack(kt, {.ratio = 0.5});
    auto q = RazoredTensor::pack(kt.contiguous(), {.ratio = 0.5});
    CHECK(p->shape() == Shape{2, 3, 5});
    CHECK(std::memcmp(p->unpack().f32(), q->unpack().f32(), 30 * 4) == 0);
}

TEST_CASE("razored tensor: bad input names the codec, expected and actual, and a hint") {
    CHECK_THROWS_WITH_AS(RazoredTensor::pack(Tensor::zeros({2, 2}), {.ratio = 1.5}),
                         doctest::Contains("expected a prune ratio r in [0, 1]"), Error);
    CHECK_THROWS_WITH_AS(RazoredTensor::pack(Tensor::from_vector_i64({2}, {1, 2}), {.ratio = 0.5}),
                         doctest::Contains("expected an f32 tensor, got i64"), Error);
}

TEST_CASE("razored tensor: masker counters count packed tensors and samples") {
    const MaskerCounters before = masker_counters();
    RazoredTensor::pack(Tensor::ones({3, 10}), {.ratio = 0.5});
    const MaskerCounters after = masker_counters();
    CHECK(after.tensors - before.tensors == 1);
    CHECK(after.samples - before.samples == 3);
}

TEST_CASE("dense coded tensor: fp16 and int8 round trips and bytes") {
    Generator gen(7);
    Tensor x = Tensor::randn({4, 3, 37}, gen);
    auto h = DenseCodedTensor::pack(x, ValueCodec::F16);
    CHECK(h->stored_bytes() == 2 * x.numel());
    CHECK(h->format() == "dense+f16");
    const Tensor uh = h->unpack();
    int64_t bad = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
        bad += bits_of(uh.f32()[i]) != bits_of(half_bits_to_float(float_to_half_bits(x.f32()[i])));
    CHECK(bad == 0);

    auto q = DenseCodedTensor::pack(x, ValueCodec::I8);
    CHECK(q->stored_bytes() == x.numel() + 8 * 4);
    CHECK(q->format() == "dense+i8");
    const Tensor uq = q->unpack();
    for (int64_t b = 0; b < 4; ++b) {
        const float step = q->qparams()[2 * b + 1];
        for (int64_t i = 0; i < 111; ++i) {
            const int64_t f = b * 111 + i;
            bad += std::fabs(uq.f32()[f] - x.f32()[f]) > 0.5f * step + 1e-6f;
        }
    }
    CHECK(bad == 0);
    CHECK_THROWS_AS(DenseCodedTensor::pack(x, ValueCodec::F32), Error);
}

TEST_CASE("razored tensor: the reference masker and fp16 storage match PyTorch (fixture backrazor)") {
    SafeTensors fx = load_fixture("backrazor");
    auto& t = fx.tensors;
    auto keep_of = [](const RazoredTensor& r) {
        Tensor k = Tensor::empty(r.shape());
        const int64_t n_s = r.sample_numel();
        for (int64_t f = 0; f < k.numel(); ++f) k.f32()[f] = is_kept(r, f / n_s, f % n_s) ? 1.f : 0.f;
        return k;
    };
    for (std::string c : {"mask", "linear", "conv", "ln", "bn", "half"}) {
        for (TieMode mode : {TieMode::Razor, TieMode::Reference}) {
            auto r = RazoredTensor::pack(t.at(c + ".x"), {.ratio = 0.9, .ties = mode});
            check_close(keep_of(*r), t.at(c + ".keep"), 0, 0, c + " keep mask (" + tie_mode_name(mode) + ")");
        }
    }
    auto h = RazoredTensor::pack(t.at("half.x"), {.ratio = 0.9, .values = ValueCodec::F16});
    check_close(h->unpack(), t.at("half.unpacked"), 0, 0, "fp16 values: x_s.half().float()");
}
