// tests/core/ops/test_layer_norm.cpp -- layer_norm: gradcheck (affine on/off), PyTorch parity, errors, what is saved.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("layer_norm: gradcheck") {
    SUBCASE("affine, 3-D input") {
        Tensor x = randn_leaf({2, 3, 5}, 51, 2.f), w = randn_leaf({5}, 52), b = randn_leaf({5}, 53);
        gradcheck("layer_norm affine", [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
                  {x, w, b});
    }
    SUBCASE("no affine") {
        Tensor x = randn_leaf({4, 6}, 54);
        gradcheck("layer_norm plain", [](const std::vector<Tensor>& in) { return layer_norm(in[0], {}, {}); }, {x});
    }
    SUBCASE("weight only requires grad, x frozen") {
        Tensor x = randn_leaf({3, 4}, 55).detach().clone(), w = randn_leaf({4}, 56);
        gradcheck("layer_norm weight only", [=](const std::vector<Tensor>& in) { return layer_norm(x, in[0], {}); },
                  {w});
    }
}

TEST_CASE("layer_norm: matches PyTorch") {
    SafeTensors fx = load_fixture("layer_norm");
    auto& t = fx.tensors;
    for (std::string c : {"affine", "plain"}) {
        CAPTURE(c);
        const bool affine = c == "affine";
        Tensor x = leaf(t.at(c + ".x"));
        Tensor w = affine ? leaf(t.at(c + ".weight")) : Tensor(), b = affine ? leaf(t.at(c + ".bias")) : Tensor();
        Tensor y = layer_norm(x, w, b, 1e-5f);
        check_close(y, t.at(c + ".out"), 1e-5, 1e-5, c + " forward");
        y.backward(t.at(c + ".grad_out"));
        check_close(x.grad(), t.at(c + ".grad_x"), 1e-5, 1e-5, c + " grad x");
        if (affine) {
            // 1e-4: weight/bias gradients are sums over all 12 rows; float32 summation order differs from PyTorch.
            check_close(w.grad(), t.at(c + ".grad_weight"), 1e-4, 1e-5, "grad weight");
            check_close(b.grad(), t.at(c + ".grad_bias"), 1e-4, 1e-5, "grad bias");
        }
    }
}

TEST_CASE("layer_norm: saves x plus two floats per row, nothing after backward") {
    auto live = [] { return current_tape().live(); };
    Tensor x = randn_leaf({3, 4, 16}, 61);   // 12 rows x 16 = 192 floats = 768 bytes
    Tensor w = randn_leaf({16}, 62), b = randn_leaf({16}, 63);
    Tensor y = layer_norm(x, w, b);
    CHECK(live().stored_bytes == 768 + 12 * 2 * 4);
    CHECK(live().items == 4);   // x, mean, rstd, weight (by reference)
    y.backward(Tensor::ones(y.shape()));
    CHECK(live().stored_bytes == 0);
    CHECK(live().items == 0);

    SUBCASE("only bias trains: nothing saved") {
        Tensor xc = x.detach().clone(), wc = w.detach().clone();
        Tensor y2 = layer_norm(xc, wc, b);
        CHECK(live().stored_bytes == 0);
        y2.backward(Tensor::ones(y2.shape()));
    }
}

TEST_CASE("layer_norm: large input (parallel path) keeps the statistics exact despite a big offset") {
    const int64_t R = 256, D = 128;   // 32768 values: OpenMP over rows and over the reduction chunks
    std::vector<float> v(R * D);
    for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < D; ++j) v[r * D + j] = 1000.f + static_cast<float>(r) + (j % 2 ? 1.f : -1.f);
    Tensor x = Tensor::from_vector({R, D}, v);
    x.requires_grad_();
    Tensor b = Tensor::zeros({D});
    b.requires_grad_();
    Tensor y = layer_norm(x, {}, b, 0.f);   // mean 1000 + r, var 1 -> y = +-1
    const std::vector<float> out = y.to_vector();
    for (int64_t i = 0; i < R * D; ++i) REQUIRE(out[i] == ((i % D) % 2 ? 1.f : -1.f));
    y.backward(Tensor::ones(y.shape()));
    for (float g : b.grad().to_vector()) REQUIRE(g == static_cast<float>(R));
    // d/dx of Σ y over a row is 0 (the row always sums to 0 after normalisation).
    for (float g : x.grad().to_vector()) REQUIRE(std::abs(g) < 1e-4f);
}

TEST_CASE("layer_norm: errors name the op, the expected and actual shapes, and a hint") {
    Tensor x = Tensor::zeros({2, 5});
    CHECK_THROWS_WITH_AS(layer_norm(x, Tensor::ones({4}), {}),
                         doctest::Contains("layer_norm: expected weight (5) for x (2, 5), got (4); hint"), Error);
    CHECK_THROWS_WITH_AS(layer_norm(x, {}, Tensor::ones({5, 1})), doctest::Contains("expected bias (5)"), Error);
    CHECK_THROWS_WITH_AS(layer_norm(Tensor::scalar(1.f), {}, {}), doctest::Contains("layer_norm: expected x (..., D)"),
                         Error);
    CHECK_THROWS_WITH_AS(layer_norm(Tensor::zeros({2, 5}, DType::I64), {}, {}),
                         doctest::Contains("layer_norm: expected x f32"), Error);
}
