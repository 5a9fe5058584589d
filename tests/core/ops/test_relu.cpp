// tests/core/ops/test_relu.cpp -- relu: gradcheck, 1-bit save, PyTorch parity; add_relu: gradcheck, equal to
// relu(add(a, b)) bit for bit (whose parts have PyTorch fixtures), the same 1-bit save, errors.
#include <cmath>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("relu: gradcheck away from 0") {
    Tensor x = away_from(randn_leaf({4, 7}, 5), {0.f}, 0.05f);
    gradcheck("relu", [](const std::vector<Tensor>& in) { return relu(in[0]); }, {x});
}

TEST_CASE("relu: saves a 1-bit mask, not the tensor") {
    Tensor x = randn_leaf({8, 64}, 6);   // 512 elements -> 512 bits = 64 bytes
    Tensor y = relu(x);
    TapeTotals live = current_tape().live();
    CHECK(live.stored_bytes == 64);
    CHECK(live.dense_bytes == 64);   // the dense tape keeps the same bits
    y.backward(Tensor::ones(y.shape()));
    CHECK(current_tape().live().stored_bytes == 0);
}

namespace {
// The op on the fixture's x, its output and its gradient for the fixture's upstream gradient, exactly.
void check_fixture(const std::string& name, Tensor (*op)(const Tensor&)) {
    SafeTensors fx = load_fixture(name);
    Tensor x = leaf(fx.tensors.at("x"));
    Tensor y = op(x);
    check_close(y, fx.tensors.at("out"), 0, 0, name + " forward");
    y.backward(fx.tensors.at("grad_out"));
    check_close(x.grad(), fx.tensors.at("grad_x"), 0, 0, name + " grad");
}
}  // namespace

TEST_CASE("relu: matches PyTorch") { check_fixture("relu", relu); }

TEST_CASE("relu6: gradcheck away from 0 and 6; saves a 1-bit mask; matches PyTorch") {
    Tensor x = away_from(leaf(Tensor::from_vector({3, 37}, [] {   // 111 elements over [-3, 9): a partial mask word
                             std::vector<float> v(111);
                             for (size_t i = 0; i < v.size(); ++i) v[i] = -3.f + 12.f * static_cast<float>(i) / 111.f;
                             return v;
                         }())),
                         {0.f, 6.f}, 0.05f);
    gradcheck("relu6", [](const std::vector<Tensor>& in) { return relu6(in[0]); }, {x});

    Tensor big = randn_leaf({8, 64}, 9);
    Tensor y = relu6(big);
    CHECK(current_tape().live().stored_bytes == 64);   // 512 bits
    y.backward(Tensor::ones(y.shape()));
    CHECK(current_tape().live().stored_bytes == 0);

    check_fixture("relu6", relu6);
}

TEST_CASE("add_relu: gradcheck away from 0, both inputs") {
    Tensor a = randn_leaf({3, 37}, 7), b = randn_leaf({3, 37}, 8);   // 111 elements: a partial last mask word
    {
        NoGradGuard no_grad;   // move a + b away from the kink
        const std::vector<float> s = add(a, b).to_vector();
        std::vector<float> av = a.to_vector();
        for (size_t i = 0; i < s.size(); ++i)
            if (std::fabs(s[i]) < 0.05f) av[i] += s[i] < 0 ? -0.1f : 0.1f;
        a = leaf(Tensor::from_vector(a.shape(), av));
    }
    gradcheck("add_relu", [](const std::vector<Tensor>& in) { return add_relu(in[0], in[1]); }, {a, b});
}

TEST_CASE("add_relu: bit-identical to relu(add(a, b)) forward and backward; saves only the 1-bit mask") {
    for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{1000}, int64_t{70'001}}) {   // parallel above 2^15
        INFO("n = ", n);
        Tensor a1 = randn_leaf({n}, 9), b1 = randn_leaf({n}, 10);
        Tensor a2 = leaf(a1.detach()), b2 = leaf(b1.detach());
        Tensor fused = add_relu(a1, b1);
        CHECK(current_tape().live().stored_bytes == (n + 63) / 64 * 8);
        Tensor pair = relu(add(a2, b2));
        CHECK(fused.to_vector() == pair.to_vector());
        Generator gen(11);
        const Tensor g = Tensor::randn({n}, gen);
        fused.backward(g);
        pair.backward(g);
        CHECK(a1.grad().to_vector() == a2.grad().to_vector());
        CHECK(b1.grad().to_vector() == b2.grad().to_vector());
        CHECK_FALSE(a1.grad().same_storage(b1.grad()));   // one gradient tensor for both inputs, copied per leaf
    }
}

TEST_CASE("add_relu: a shape mismatch names the op, both shapes and a hint") {
    CHECK_THROWS_WITH_AS(add_relu(Tensor::zeros({2, 3}), Tensor::zeros({3})),
                         doctest::Contains("add_relu: expected a and b of one shape, got (2, 3) and (3)"), Error);
}
