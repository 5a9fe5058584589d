// tests/core/ops/test_unary.cpp -- neg, exp, log, sqrt, pow, tanh, sigmoid: exp kernel accuracy, gradcheck,
// PyTorch parity, errors, what is saved.
#include <cmath>
#include <limits>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
// |x| + 0.5: positive and away from 0, where log, sqrt and fractional powers are smooth.
Tensor positive_leaf(const Shape& shape, uint64_t seed) {
    Tensor t = randn_leaf(shape, seed);
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::abs(p[i]) + 0.5f;
    return t;
}
}  // namespace

TEST_CASE("exp_kernel: relative error within 1.5e-7 of exp over the whole float range; edges as libm") {
    double worst = 0;
    float worst_x = 0;
    for (int i = 0; i <= 200000; ++i) {
        const float x = -87.3f + (88.7f + 87.3f) * static_cast<float>(i) / 200000.f;
        const double want = std::exp(static_cast<double>(x));
        const double err = std::abs(exp_kernel(x) - want) / want;
        if (err > worst) worst = err, worst_x = x;
    }
    INFO("worst relative error " << worst << " at x = " << worst_x);
    CHECK(worst < 1.5e-7);
    CHECK(exp_kernel(0.f) == 1.f);
    CHECK(exp_kernel(89.f) == std::numeric_limits<float>::infinity());
    CHECK(exp_kernel(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
    CHECK(exp_kernel(-100.f) == 0.f);
    CHECK(exp_kernel(-std::numeric_limits<float>::infinity()) == 0.f);
    CHECK(std::isnan(exp_kernel(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("unary: gradcheck") {
    Tensor x = randn_leaf({3, 5}, 11);
    Tensor xp = positive_leaf({3, 5}, 12);
    gradcheck("neg", [](const std::vector<Tensor>& in) { return neg(in[0]); }, {x});
    gradcheck("exp", [](const std::vector<Tensor>& in) { return exp(in[0]); }, {x}, {.eps = 1e-3});
    gradcheck("tanh", [](const std::vector<Tensor>& in) { return tanh(in[0]); }, {x});
    gradcheck("sigmoid", [](const std::vector<Tensor>& in) { return sigmoid(in[0]); }, {x});
    gradcheck("log", [](const std::vector<Tensor>& in) { return log(in[0]); }, {xp}, {.eps = 1e-3});
    gradcheck("sqrt", [](const std::vector<Tensor>& in) { return sqrt(in[0]); }, {xp}, {.eps = 1e-3});
    // integer exponents on signed inputs, fractional and negative ones on positive inputs
    for (float p : {0.f, 1.f, 2.f, 3.f}) {
        INFO("exponent " << p);
        gradcheck("pow", [p](const std::vector<Tensor>& in) { return pow(in[0], p); }, {x}, {.eps = 1e-3});
    }
    for (float p : {0.5f, -1.f, 1.5f, -2.5f, 4.f}) {
        INFO("exponent " << p);
        gradcheck("pow", [p](const std::vector<Tensor>& in) { return pow(in[0], p); }, {xp}, {.eps = 1e-3});
    }
}

TEST_CASE("unary: match PyTorch") {
    SafeTensors fx = load_fixture("unary");
    auto& t = fx.tensors;
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> signed_ops = {
        {"neg", [](const Tensor& v) { return neg(v); }},
        {"exp", [](const Tensor& v) { return exp(v); }},
        {"tanh", [](const Tensor& v) { return tanh(v); }},
        {"sigmoid", [](const Tensor& v) { return sigmoid(v); }},
        {"pow_2", [](const Tensor& v) { return pow(v, 2.f); }},
        {"pow_3", [](const Tensor& v) { return pow(v, 3.f); }},
        {"pow_0", [](const Tensor& v) { return pow(v, 0.f); }},
        {"pow_1", [](const Tensor& v) { return pow(v, 1.f); }}};
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> positive_ops = {
        {"log", [](const Tensor& v) { return log(v); }},
        {"sqrt", [](const Tensor& v) { return sqrt(v); }},
        {"pow_0.5", [](const Tensor& v) { return pow(v, 0.5f); }},
        {"pow_-1", [](const Tensor& v) { return pow(v, -1.f); }},
        {"pow_1.5", [](const Tensor& v) { return pow(v, 1.5f); }},
        {"pow_-2.5", [](const Tensor& v) { return pow(v, -2.5f); }}};
    for (const auto* ops : {&signed_ops, &positive_ops}) {
        for (const auto& [name, fn] : *ops) {
            Tensor x = leaf(t.at(ops == &signed_ops ? "x" : "xpos"));
            Tensor y = fn(x);
            check_close(y, t.at(name + ".out"), 1e-5, 1e-6, name + " forward");
            y.backward(t.at("grad_out"));
            check_close(x.grad(), t.at(name + ".grad"), 1e-5, 1e-6, name + " grad");
        }
    }
}

TEST_CASE("unary: edge values as PyTorch") {
    Tensor x = Tensor::from_vector({4}, {0.f, -1.f, 100.f, -100.f});
    std::vector<float> l = log(x).to_vector();
    CHECK(l[0] == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(l[1]));
    std::vector<float> s = sigmoid(x).to_vector();
    CHECK(s[2] == 1.f);
    CHECK(s[3] >= 0.f);
    CHECK(s[3] < 1e-37f);
    std::vector<float> th = tanh(x).to_vector();
    CHECK(th[2] == 1.f);
    CHECK(th[3] == -1.f);
    CHECK(std::isnan(pow(x, 0.5f).to_vector()[1]));
    CHECK(pow(x, 3.f).to_vector()[1] == -1.f);
    CHECK(exp(x).to_vector()[2] == std::numeric_limits<float>::infinity());
    // pow(x, 0) has gradient 0 even at x = 0 (PyTorch masks the 0 * inf)
    Tensor z = Tensor::from_vector({2}, {0.f, 2.f}).requires_grad_();
    pow(z, 0.f).backward(Tensor::ones({2}));
    CHECK(z.grad().to_vector() == std::vector<float>{0.f, 0.f});
}

TEST_CASE("unary: non-contiguous input") {
    Tensor base = randn_leaf({4, 3}, 13).detach();
    Tensor xt = base.as_strided({3, 4}, {1, 3}, 0);   // the transpose, a strided view
    CHECK_FALSE(xt.is_contiguous());
    check_close(tanh(xt), tanh(xt.contiguous()), 0, 0, "tanh of a strided view");
    check_close(exp(xt), exp(xt.contiguous()), 0, 0, "exp of a strided view");
}

TEST_CASE("unary: wrong dtype and undefined input name the op") {
    Tensor idx = Tensor::zeros({3}, DType::I64);
    CHECK_THROWS_WITH_AS(exp(idx), doctest::Contains("exp: expected an f32 tensor, got i64 (3)"), Error);
    CHECK_THROWS_WITH_AS(pow(idx, 2.f), doctest::Contains("pow: expected an f32 tensor"), Error);
    CHECK_THROWS_WITH_AS(log(Tensor()), doctest::Contains("log: got an undefined tensor"), Error);
}

TEST_CASE("unary: saves the output for exp/sqrt/tanh/sigmoid, the input for log/pow, nothing for neg") {
    const int64_t n = 6 * 7;
    struct Case {
        std::string op;
        std::function<Tensor(const Tensor&)> fn;
        const char* saved;   // nullptr: nothing
    };
    const std::vector<Case> cases = {
        {"neg", [](const Tensor& v) { return neg(v); }, nullptr},
        {"exp", [](const Tensor& v) { return exp(v); }, "y"},
        {"sqrt", [](const Tensor& v) { return sqrt(v); }, "y"},
        {"tanh", [](const Tensor& v) { return tanh(v); }, "y"},
        {"sigmoid", [](const Tensor& v) { return sigmoid(v); }, "y"},
        {"log", [](const Tensor& v) { return log(v); }, "x"},
        {"pow", [](const Tensor& v) { return pow(v, 1.5f); }, "x"},
        {"pow", [](const Tensor& v) { return pow(v, 1.f); }, nullptr},
        {"pow", [](const Tensor& v) { return pow(v, 0.f); }, nullptr}};
    for (const Case& c : cases) {
        INFO(c.op);
        Tensor x = positive_leaf({6, 7}, 14);
        Tensor y = c.fn(x);
        const TapeTotals live = current_tape().live();
        const auto records = current_tape().records();
        if (c.saved) {
            REQUIRE(records.size() == 1);
            CHECK(records[0].name == c.saved);
            CHECK(records[0].kind == SaveKind::Activation);
            CHECK(live.stored_bytes == n * 4);
        } else {
            CHECK(live.items == 0);
        }
        y.backward(Tensor::ones(y.shape()));
        CHECK(current_tape().live().items == 0);
        CHECK(current_tape().live().stored_bytes == 0);
    }
    // nothing is saved when no gradient is needed
    Tensor c = positive_leaf({6, 7}, 15).detach();
    Tensor y = exp(c);
    CHECK(current_tape().live().items == 0);
    CHECK(y.grad_fn() == nullptr);
}

TEST_CASE("unary: an in-place write into the saved output is reported at backward") {
    Tensor x = randn_leaf({5}, 16);
    Tensor y = exp(x);
    Tensor z = mul(y, 2.f);
    y.mul_(3.f);   // y is saved by exp's node
    CHECK_THROWS_WITH_AS(z.backward(Tensor::ones({5})), doctest::Contains("exp"), Error);
}
