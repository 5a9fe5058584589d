// tests/core/ops/test_dropout.cpp -- inverted dropout: mask statistics, scaling, eval mode, the 1-bit save,
// determinism (seed, thread count), forward/backward against the drawn mask, gradcheck, errors.
// No PyTorch fixture: the mask comes from razor's Generator.
#include <cmath>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("dropout: the kept fraction is near 1 - p and kept values are scaled by 1 / (1 - p)") {
    Tensor x = Tensor::ones({200, 500});   // 1e5 elements: the kept fraction has std <= 0.0016
    Generator gen(7);
    for (float p : {0.1f, 0.5f, 0.9f}) {
        INFO("p = " << p);
        Tensor y = dropout(x, p, true, gen);
        const float scale = 1.f / (1.f - p);
        int64_t kept = 0, bad = 0;
        for (float v : y.to_vector()) {
            if (v == scale) ++kept;
            else if (v != 0.f) ++bad;
        }
        CHECK(bad == 0);
        CHECK(std::abs(double(kept) / x.numel() - (1.0 - p)) < 0.01);
    }
}

TEST_CASE("dropout: eval mode and p == 0 return the input itself; p == 1 gives zeros and zero gradients") {
    Tensor x = randn_leaf({3, 4}, 51);
    Generator gen(8);
    const auto state = gen.state();
    Tensor e = dropout(x, 0.5f, false, gen);
    CHECK(e.impl() == x.impl());
    Tensor z = dropout(x, 0.f, true, gen);
    CHECK(z.impl() == x.impl());
    CHECK(gen.state() == state);   // no draw
    CHECK(current_tape().live().items == 0);

    Tensor y = dropout(x, 1.f, true, gen);
    CHECK(y.to_vector() == std::vector<float>(12, 0.f));
    CHECK(current_tape().live().items == 0);   // nothing to save
    y.backward(Tensor::ones({3, 4}));
    CHECK(x.grad().to_vector() == std::vector<float>(12, 0.f));
}

TEST_CASE("dropout: the mask costs n/8 bytes on the tape, freed after backward") {
    Generator gen(9);
    for (int64_t n : {512, 1000}) {
        Tensor x = randn_leaf({n}, 52);
        Tensor y = dropout(x, 0.3f, true, gen);
        const TapeTotals live = current_tape().live();
        CHECK(live.items == 1);
        CHECK(live.stored_bytes == (n + 63) / 64 * 8);   // 1 bit per element in whole 64-bit words
        CHECK(live.dense_bytes == live.stored_bytes);   // the dense tape keeps the same bits
        CHECK(current_tape().records()[0].kind == SaveKind::Mask);
        y.backward(Tensor::ones({n}));
        CHECK(current_tape().live().stored_bytes == 0);
    }
}

TEST_CASE("dropout: forward and backward follow the mask it drew") {
    Tensor x = away_from(randn_leaf({7, 9}, 53), {0.f}, 0.1f);   // nonzero, so y != 0 exactly where kept
    Tensor g = randn_leaf({7, 9}, 54).detach();
    Generator gen(10);
    const float p = 0.4f, scale = 1.f / (1.f - p);
    Tensor y = dropout(x, p, true, gen);
    y.backward(g);
    const std::vector<float> xv = x.to_vector(), yv = y.to_vector(), gv = g.to_vector(), gx = x.grad().to_vector();
    int64_t kept = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
        const bool keep = yv[i] != 0.f;
        kept += keep;
        CHECK(yv[i] == (keep ? xv[i] * scale : 0.f));
        CHECK(gx[i] == (keep ? gv[i] * scale : 0.f));
    }
    CHECK(kept > 0);
    CHECK(kept < int64_t(xv.size()));
}

TEST_CASE("dropout: deterministic for a seed, independent of the thread count; each call draws a new mask") {
    Tensor x = Tensor::ones({300, 300});   // 90000 elements: above the parallel threshold
    const int threads = num_threads();
    set_num_threads(1);
    Generator g1(11);
    const std::vector<float> one = dropout(x, 0.5f, true, g1).to_vector();
    set_num_threads(2);
    Generator g2(11);
    const std::vector<float> two = dropout(x, 0.5f, true, g2).to_vector();
    set_num_threads(threads);
    CHECK(one == two);
    const std::vector<float> next = dropout(x, 0.5f, true, g2).to_vector();
    CHECK(next != two);
}

TEST_CASE("dropout: gradcheck with a fixed mask") {
    Tensor x = randn_leaf({4, 6}, 55);
    gradcheck("dropout",
              [](const std::vector<Tensor>& in) {
                  Generator gen(12);   // re-seeded per evaluation: every evaluation draws the same mask
                  return dropout(in[0], 0.3f, true, gen);
              },
              {x});
}

TEST_CASE("dropout: errors for p outside [0, 1] and for a non-f32 input") {
    Generator gen(13);
    Tensor x = Tensor::zeros({3});
    CHECK_THROWS_WITH_AS(dropout(x, -0.1f, true, gen), doctest::Contains("dropout: probability p must be in [0, 1], got -0.1"),
                         Error);
    CHECK_THROWS_WITH_AS(dropout(x, 1.5f, true, gen), doctest::Contains("got 1.5; hint:"), Error);
    CHECK_THROWS_WITH_AS(dropout(x, NAN, false, gen), doctest::Contains("dropout: probability p"), Error);
    CHECK_THROWS_WITH_AS(dropout(Tensor::zeros({3}, DType::I64), 0.5f, true, gen),
                         doctest::Contains("dropout: expected an f32 tensor, got i64"), Error);
}
