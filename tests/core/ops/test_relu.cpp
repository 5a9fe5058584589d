// tests/core/ops/test_relu.cpp -- relu: gradcheck, 1-bit save, PyTorch parity; add_relu: gradcheck, equal to
// relu(add(a, b)) bit for bit (whose parts have PyTorch fixtures), the same 1-bit save, errors; add_relu_channels:
// gradcheck, equal to relu(index_add(index_add(zeros, a), b)) bit for bit (index_add and relu have PyTorch fixtures),
// the same save, errors.
#include <cmath>

#include "support/gradcheck.h"
#include "support/overwrite.h"

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

namespace {
Tensor positions(const std::vector<int64_t>& at) {
    return Tensor::from_vector_i64({static_cast<int64_t>(at.size())}, at);
}
// The unfused reference: both inputs scattered into zeros over `channels`, added, relu.
Tensor reference_channels(const Tensor& a, const std::vector<int64_t>& a_at, const Tensor& b,
                          const std::vector<int64_t>& b_at, int64_t channels) {
    Shape s = a.shape();
    s[1] = channels;
    return relu(index_add(index_add(Tensor::zeros(s), 1, positions(a_at), a), 1, positions(b_at), b));
}
}  // namespace

TEST_CASE("add_relu_channels: gradcheck away from 0, both inputs, a channel neither holds") {
    // 6 output channels: a holds 0, 2, 3, 5; b holds 1, 3, 5; channel 4 is in neither. Planes of 5: words span planes.
    const std::vector<int64_t> a_at = {0, 2, 3, 5}, b_at = {1, 3, 5};
    Tensor a = randn_leaf({2, 4, 5}, 21), b = randn_leaf({2, 3, 5}, 22);
    {
        NoGradGuard no_grad;   // inputs away from 0 by >= 0.2; sums of two may still land near 0 (checked below)
        std::vector<float> av = a.to_vector(), bv = b.to_vector();
        for (auto* v : {&av, &bv})
            for (float& x : *v)
                if (std::fabs(x) < 0.2f) x += x < 0 ? -0.3f : 0.3f;
        for (auto [ia, ib] : {std::pair{2, 1}, {3, 2}})   // channels 3 and 5 hold a + b: move a where the sum is near 0
            for (int64_t n = 0; n < 2; ++n)
                for (int64_t k = 0; k < 5; ++k) {
                    float& x = av[static_cast<size_t>((n * 4 + ia) * 5 + k)];
                    const float sum = x + bv[static_cast<size_t>((n * 3 + ib) * 5 + k)];
                    if (std::fabs(sum) < 0.2f) x += sum < 0 ? -0.4f : 0.4f;
                }
        a = leaf(Tensor::from_vector(a.shape(), av));
        b = leaf(Tensor::from_vector(b.shape(), bv));
    }
    gradcheck("add_relu_channels",
              [&](const std::vector<Tensor>& in) { return add_relu_channels(in[0], a_at, in[1], b_at, 6); }, {a, b});
}

TEST_CASE("add_relu_channels: bit-identical to relu of both scattered into zeros; saves only the 1-bit mask") {
    struct Case {
        std::vector<int64_t> a_at, b_at;
        int64_t channels, plane;
    };
    const std::vector<Case> cases = {
        {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 4, 6}, 8, 64},     // b inside a (the stream holds the branch), whole words
        {{2, 5}, {0, 1, 2, 3, 4, 5}, 6, 9},               // a inside b, planes of 9: words span planes
        {{0, 3, 4}, {1, 3, 6}, 8, 1},                     // neither, channels 2, 5, 7 in none, 1-element planes
        {{0, 2, 4, 6, 8, 10, 12, 14}, {1, 2, 3, 5, 8, 13, 15}, 16, 1024},   // parallel above 2^15 elements
    };
    for (const Case& c : cases) {
        INFO("channels ", c.channels, ", plane ", c.plane);
        const int64_t N = 3, na = static_cast<int64_t>(c.a_at.size()), nb = static_cast<int64_t>(c.b_at.size());
        Tensor a1 = randn_leaf({N, na, c.plane}, 23), b1 = randn_leaf({N, nb, c.plane}, 24);
        Tensor a2 = leaf(a1.detach()), b2 = leaf(b1.detach());
        const int64_t live_before = current_tape().live().stored_bytes;
        Tensor fused = add_relu_channels(a1, c.a_at, b1, c.b_at, c.channels);
        CHECK(current_tape().live().stored_bytes - live_before == (N * c.channels * c.plane + 63) / 64 * 8);
        Tensor ref = reference_channels(a2, c.a_at, b2, c.b_at, c.channels);
        CHECK(fused.shape() == ref.shape());
        CHECK(fused.to_vector() == ref.to_vector());
        Generator gen(25);
        const Tensor g = Tensor::randn(ref.shape(), gen);
        fused.backward(g);
        ref.backward(g);
        CHECK(a1.grad().to_vector() == a2.grad().to_vector());
        CHECK(b1.grad().to_vector() == b2.grad().to_vector());
    }
}

TEST_CASE("add_relu_channels: a wrong shape or position names the op, what was expected and a hint") {
    const Tensor a = Tensor::zeros({2, 3, 4}), b = Tensor::zeros({2, 2, 4});
    CHECK_THROWS_WITH_AS(add_relu_channels(a, {0, 1}, b, {1, 2}, 3),
                         doctest::Contains("add_relu_channels: expected a of shape (N, 2, ...)"), Error);
    CHECK_THROWS_WITH_AS(add_relu_channels(a, {0, 1, 1}, b, {1, 2}, 3),
                         doctest::Contains("a's channel position 1 is out of [0, 3) or repeated"), Error);
    CHECK_THROWS_WITH_AS(add_relu_channels(a, {0, 1, 2}, b, {1, 3}, 3),
                         doctest::Contains("b's channel position 3 is out of [0, 3)"), Error);
    CHECK_THROWS_WITH_AS(add_relu_channels(a, {0, 1, 2}, Tensor::zeros({2, 2, 5}), {1, 2}, 3),
                         doctest::Contains("differ outside dim 1"), Error);
}

TEST_CASE("add_relu(Tensor&&): writes y over the a the caller gave up; same values, gradients and save; never over "
          "a shared a") {
    Tensor p = randn_leaf({3, 5, 7}, 31), q = randn_leaf({3, 5, 7}, 32);
    const Tensor scaled = mul(p, 1.5f);
    int64_t saved_before = current_tape().live().stored_bytes;
    const Tensor expected = add_relu(scaled, q);
    const int64_t plain_saves = current_tape().live().stored_bytes - saved_before;
    Tensor a = mul(p, 1.5f);   // fresh, with history: the block's h
    const void* storage = a.storage().get();
    saved_before = current_tape().live().stored_bytes;
    const Tensor y = add_relu(std::move(a), q);
    CHECK(y.storage().get() == storage);
    CHECK(y.to_vector() == expected.to_vector());
    CHECK(current_tape().live().stored_bytes - saved_before == plain_saves);   // the 1-bit mask only
    sum(mul(y, y)).backward();
    const std::vector<float> gp = p.grad().to_vector(), gq = q.grad().to_vector();
    p.zero_grad(), q.zero_grad();
    sum(mul(expected, expected)).backward();
    CHECK(gp == p.grad().to_vector());
    CHECK(gq == q.grad().to_vector());
    check_overwrite_spares_shared([&] { return mul(p, 1.5f); }, q,
                                  [](Tensor&& x, const Tensor& other) { return add_relu(std::move(x), other); });
}
