// tests/core/ops/test_gelu.cpp -- exact (erf) GELU: gradcheck, PyTorch parity, errors, the input is saved.
#include <cmath>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
// Saves a copy of each tensor (as Back Razor's codes and fp16 copies do): nothing on the tape holds the input's storage.
class CopyingPolicy final : public SavePolicy {
public:
    std::string name() const override { return "copying"; }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override {
        return std::make_unique<DenseSaved>(t.clone(), std::string(site.op), true);
    }
};
}  // namespace

TEST_CASE("gelu: gradcheck") {
    Tensor x = randn_leaf({4, 6}, 21, 2.f);
    gradcheck("gelu", [](const std::vector<Tensor>& in) { return gelu(in[0]); }, {x}, {.eps = 1e-3});
}

TEST_CASE("gelu: matches PyTorch (approximate='none'), including tails and 0") {
    SafeTensors fx = load_fixture("gelu");
    Tensor x = leaf(fx.tensors.at("x"));
    Tensor y = gelu(x);
    // atol 1e-6 also absorbs PyTorch's own float cancellation of 1 + erf in the tail (x = -4.5, -9 here)
    check_close(y, fx.tensors.at("out"), 1e-5, 1e-6, "gelu forward");
    y.backward(fx.tensors.at("grad_out"));
    check_close(x.grad(), fx.tensors.at("grad_x"), 1e-5, 1e-6, "gelu grad");
}

TEST_CASE("gelu: wrong dtype names the op") {
    CHECK_THROWS_WITH_AS(gelu(Tensor::zeros({2, 2}, DType::U8)), doctest::Contains("gelu: expected an f32 tensor, got u8"),
                         Error);
}

TEST_CASE("gelu: saves its input as an activation, freed after backward") {
    Tensor x = randn_leaf({8, 16}, 22);
    Tensor y = gelu(x);
    const auto records = current_tape().records();
    REQUIRE(records.size() == 1);
    CHECK(records[0].name == "x");
    CHECK(records[0].kind == SaveKind::Activation);
    CHECK(current_tape().live().stored_bytes == 8 * 16 * 4);
    y.backward(Tensor::ones(y.shape()));
    CHECK(current_tape().live().stored_bytes == 0);
    Tensor c = x.detach();
    gelu(c);
    CHECK(current_tape().live().items == 0);
}

TEST_CASE("gelu: forward and derivative match the double-precision erf formula on [-10, 10]") {
    const int64_t n = 20001;
    std::vector<float> xs(n);
    for (int64_t i = 0; i < n; ++i) xs[i] = -10.f + 20.f * static_cast<float>(i) / (n - 1);
    Tensor x = Tensor::from_vector({n}, xs).requires_grad_();
    Tensor y = gelu(x);
    y.backward(Tensor::ones({n}));
    const std::vector<float> yv = y.to_vector(), gv = x.grad().to_vector();
    double worst_y = 0, worst_g = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double v = xs[i];
        const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));   // not 1 + erf: that cancels in the tail
        const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
        const double want_y = v * cdf, want_g = cdf + v * pdf;
        // relative to the value, with a floor at 1e-30 (the far negative tail underflows towards 0)
        worst_y = std::max(worst_y, std::abs(yv[i] - want_y) / std::max(std::abs(want_y), 1e-30));
        // the derivative crosses 0 near x = -0.75, where its two terms cancel: relative to |Phi| + |x phi|
        worst_g = std::max(worst_g, std::abs(gv[i] - want_g) / (cdf + std::abs(v * pdf)));
    }
    // measured 6.6e-6 and 2.0e-6, both in the far negative tail (float rounding of x^2 inside the exponential)
    INFO("worst relative error: y " << worst_y << ", dy/dx " << worst_g);
    CHECK(worst_y < 2e-5);
    CHECK(worst_g < 1e-5);
}

TEST_CASE("gelu(Tensor&&): y over x when the tape keeps a copy, a buffer of its own when it keeps x; same values and "
          "gradients") {
    Tensor w = randn_leaf({6, 10}, 23, 2.f);
    const Tensor g = randn_leaf({6, 10}, 24).detach();
    const Tensor expected = gelu(mul(w, 1.5f));
    expected.backward(g);
    const std::vector<float> expected_grad = w.grad().to_vector();
    for (bool copying : {false, true}) {
        INFO("policy " << (copying ? "copying" : "dense"));
        w.zero_grad();
        SavePolicyGuard guard(copying ? std::make_shared<CopyingPolicy>() : nullptr);
        Tensor x = mul(w, 1.5f);   // fresh, with history: fc1's output
        const void* storage = x.storage().get();
        const Tensor y = gelu(std::move(x));
        CHECK((y.storage().get() == storage) == copying);   // the dense tape holds x itself: never overwritten
        CHECK(y.to_vector() == expected.to_vector());
        y.backward(g);
        CHECK(w.grad().to_vector() == expected_grad);
    }
    // A second handle: x stays as it was.
    Tensor shared = mul(w, 1.5f);
    const Tensor keep = shared;
    const std::vector<float> before = keep.to_vector();
    const Tensor y = gelu(std::move(shared));
    CHECK(keep.to_vector() == before);
    CHECK_FALSE(y.same_storage(keep));
}
