// tests/optim/test_sgd.cpp -- SGD follows PyTorch's update rule exactly (values from torch.optim.SGD, see comments).
#include "optim/sgd.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {
// Three steps on p = [1, -2] with constant gradient g = [0.5, 0.25].
std::vector<float> run(optim::SGDOptions o) {
    Tensor p = Tensor::from_vector({2}, {1.f, -2.f}).requires_grad_();
    optim::SGD opt({{"p", p}}, o);
    for (int i = 0; i < 3; ++i) {
        p.set_grad(Tensor::from_vector({2}, {0.5f, 0.25f}));
        opt.step();
    }
    return p.to_vector();
}
}  // namespace

TEST_CASE("SGD: PyTorch's update rules") {
    // torch: SGD([p], lr=0.1) -> p = p - 3 * 0.1 * g
    auto plain = run({.lr = 0.1f});
    CHECK(plain[0] == doctest::Approx(0.85f));
    CHECK(plain[1] == doctest::Approx(-2.075f));
    // momentum 0.9: buf = g, 1.9g, 2.71g -> p -= 0.1 * 5.61 g
    auto mom = run({.lr = 0.1f, .momentum = 0.9f});
    CHECK(mom[0] == doctest::Approx(1.f - 0.1f * 5.61f * 0.5f));
    // nesterov: d = g + 0.9 buf: 1.9g, 2.71g, 3.439g -> total 8.049g
    auto nes = run({.lr = 0.1f, .momentum = 0.9f, .nesterov = true});
    CHECK(nes[0] == doctest::Approx(1.f - 0.1f * 8.049f * 0.5f));
    // dampening 0.5: buf = g, 0.9g + 0.5g = 1.4g, 1.26g + 0.5g = 1.76g -> 4.16g
    auto damp = run({.lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f});
    CHECK(damp[0] == doctest::Approx(1.f - 0.1f * 4.16f * 0.5f));
    // weight decay couples into the gradient: d = g + wd p
    auto wd = run({.lr = 0.1f, .weight_decay = 0.1f});
    float p = 1.f;
    for (int i = 0; i < 3; ++i) p -= 0.1f * (0.5f + 0.1f * p);
    CHECK(wd[0] == doctest::Approx(p));
}

TEST_CASE("SGD: state is keyed by parameter name and round-trips") {
    Tensor p = Tensor::from_vector({2}, {1.f, 2.f}).requires_grad_();
    optim::SGD opt({{"layer.weight", p}}, {.lr = 0.1f, .momentum = 0.9f});
    p.set_grad(Tensor::ones({2}));
    opt.step();
    auto state = opt.state_dict();
    REQUIRE(state.count("layer.weight.momentum_buffer") == 1);
    optim::SGD other({{"layer.weight", p}}, {.lr = 0.1f, .momentum = 0.9f});
    other.load_state_dict(state);
    CHECK(other.state_dict().at("layer.weight.momentum_buffer").to_vector() == std::vector<float>{1.f, 1.f});
    CHECK_THROWS_WITH_AS(other.load_state_dict({{"fc.weight.momentum_buffer", Tensor::ones({2})}}),
                         doctest::Contains("names no parameter"), Error);
    CHECK_THROWS_AS(optim::SGD({{"p", p}}, {.lr = 0.1f, .nesterov = true}), Error);
}
