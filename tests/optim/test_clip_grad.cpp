// tests/optim/test_clip_grad.cpp -- clip_grad_norm_ against torch.nn.utils.clip_grad_norm_, edge cases.
//
// Fixture optim_clip (scripts/fixtures/ops_optim.py): three gradients of different scales, clipped with several
// (max_norm, norm_type); the total norm and the clipped gradients are compared within 1e-6 relative (razor
// accumulates in double, PyTorch in float32).
#include <cmath>
#include <limits>

#include "optim/clip_grad.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("clip_grad_norm_: total norm and clipped gradients match PyTorch") {
    SafeTensors fx = load_fixture("optim_clip");
    const auto& t = fx.tensors;
    const double inf = std::numeric_limits<double>::infinity();
    struct Case {
        const char* name;
        double max_norm, norm_type;
    };
    for (Case c : {Case{"l2_clip", 1.0, 2.0}, Case{"l2_noclip", 100.0, 2.0}, Case{"inf_clip", 0.5, inf},
                   Case{"l1_clip", 2.0, 1.0}, Case{"p3_clip", 0.7, 3.0}}) {
        CAPTURE(c.name);
        optim::NamedParameters params;
        for (int i = 0; i < 3; ++i) {
            Tensor p = leaf(t.at(fmt("grad.", i)));
            p.set_grad(t.at(fmt("grad.", i)).clone());
            params.emplace_back(fmt("p", i), p);
        }
        // A parameter without a gradient is skipped, not an error.
        params.emplace_back("frozen", Tensor::ones({3}).requires_grad_());
        const double total = optim::clip_grad_norm_(params, c.max_norm, c.norm_type);
        const double want = t.at(std::string(c.name) + ".total").item();
        CHECK(std::abs(total - want) <= 1e-6 * std::abs(want));
        for (int i = 0; i < 3; ++i)
            check_close(params[i].second.grad(), t.at(fmt(c.name, ".grad.", i)), 1e-6, 1e-9, fmt(c.name, " grad ", i));
        CHECK_FALSE(params[3].second.grad().defined());
        if (std::string(c.name) == "l2_noclip")   // below max_norm: untouched, bit for bit
            CHECK(params[0].second.grad().to_vector() == t.at("grad.0").to_vector());
    }
}

TEST_CASE("clip_grad_norm_: no gradients, exact scaling, non-finite norms") {
    Tensor a = Tensor::zeros({2}).requires_grad_();
    CHECK(optim::clip_grad_norm_(std::vector<Tensor>{a}, 1.0) == 0.0);   // no gradient anywhere: norm 0, no error

    // |(3, 4)| = 5 -> scaled by 1 / (5 + 1e-6)
    a.set_grad(Tensor::from_vector({2}, {3.f, 4.f}));
    CHECK(optim::clip_grad_norm_(std::vector<Tensor>{a}, 1.0) == doctest::Approx(5.0).epsilon(1e-12));
    const float coef = static_cast<float>(1.0 / (5.0 + 1e-6));
    CHECK(a.grad().to_vector() == std::vector<float>{3.f * coef, 4.f * coef});

    // A large gradient spanning several accumulation chunks: the double sum is exact for these integers.
    Tensor big = Tensor::zeros({200000}).requires_grad_();
    big.set_grad(Tensor::full({200000}, 2.f));
    CHECK(optim::clip_grad_norm_(std::vector<Tensor>{big}, 1e9) == doctest::Approx(std::sqrt(800000.0)).epsilon(1e-15));

    a.set_grad(Tensor::from_vector({2}, {NAN, 1.f}));
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm_(std::vector<Tensor>{a}, 1.0, 2.0, true),
                         doctest::Contains("the total norm of order 2 of the gradients is nan"), Error);
    CHECK(std::isnan(optim::clip_grad_norm_(std::vector<Tensor>{a}, 1.0, std::numeric_limits<double>::infinity())));
    CHECK(std::isnan(a.grad().to_vector()[1]));   // as PyTorch: scaled by the NaN coefficient
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm_(std::vector<Tensor>{a}, 1.0, 0.0), doctest::Contains("norm_type"),
                         Error);
}
