// tests/optim/test_scheduler.cpp -- lr schedulers against torch.optim.lr_scheduler, state round trips, errors.
//
// Fixture optim_schedulers (scripts/fixtures/ops_optim.py; the configs below mirror its `cases`): each group's lr
// after 0..30 steps as float64, for an optimizer with two groups (lr 0.1 and 0.02). razor's closed forms are
// compared with PyTorch's chainable forms within 1e-12 relative (they differ only by double rounding; measured
// below 1e-15).
#include <bit>
#include <cmath>
#include <functional>
#include <memory>

#include "optim/adam.h"
#include "optim/scheduler.h"
#include "optim/sgd.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;
using namespace razor::optim;

namespace {

struct TwoGroups {
    Tensor p = Tensor::zeros({2}).requires_grad_(), q = Tensor::zeros({2}).requires_grad_();
    SGD sgd{std::vector<ParamGroup<SGDOptions>>{{{{"p", p}}, {.lr = 0.1, .momentum = 0.9}},
                                                {{{"q", q}}, {.lr = 0.02, .momentum = 0.9}}}};
    Adam adam{std::vector<ParamGroup<AdamOptions>>{{{{"p", p}}, {.lr = 0.1}}, {{{"q", q}}, {.lr = 0.02}}}};
};

double f64(const Tensor& bits, int64_t i) { return std::bit_cast<double>(bits.contiguous().i64()[i]); }

bool close(double got, double want, double rtol = 1e-12, double atol = 1e-15) {
    return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// Steps `sched` 30 times and compares every group's lr (and the momentum, when `momentum` is given) to the fixture.
void replay(const std::string& name, Optimizer& opt, LRScheduler& sched,
            std::function<double()> momentum = nullptr) {
    SafeTensors fx = load_fixture("optim_schedulers");
    const Tensor& lrs = fx.tensors.at(name + ".lr");   // (31, 2) float64 bits
    REQUIRE(lrs.shape() == Shape{31, 2});
    for (int64_t t = 0; t <= 30; ++t) {
        if (t > 0) {
            opt.step();
            sched.step();
        }
        REQUIRE(sched.last_epoch() == t);
        for (size_t g = 0; g < 2; ++g) {
            const double want = f64(lrs, t * 2 + static_cast<int64_t>(g));
            CHECK_MESSAGE(close(opt.lr(g), want), name << " step " << t << " group " << g << ": lr " << opt.lr(g)
                                                       << ", torch " << want);
            CHECK(sched.get_last_lr()[g] == opt.lr(g));
        }
        if (momentum) {
            const double want = f64(fx.tensors.at(name + ".momentum"), t);
            CHECK_MESSAGE(close(momentum(), want), name << " step " << t << ": momentum " << momentum() << ", torch "
                                                        << want);
        }
    }
}

}  // namespace

TEST_CASE("schedulers: lr sequences match torch.optim.lr_scheduler") {
    {
        TwoGroups o;
        StepLR s(o.sgd, 7, 0.5);
        replay("step", o.sgd, s);
    }
    {
        TwoGroups o;
        MultiStepLR s(o.sgd, {20, 12, 5, 12}, 0.3);   // unsorted, with a repeated milestone
        replay("multistep", o.sgd, s);
    }
    {
        TwoGroups o;
        CosineAnnealingLR s(o.sgd, 20, 0.001);   // 30 steps: past T_max the cosine rises again
        replay("cosine", o.sgd, s);
    }
    {
        TwoGroups o;
        CosineAnnealingLR s(o.sgd, 30);
        replay("cosine_zero", o.sgd, s);
        CHECK(o.sgd.lr(0) == 0.0);   // cos(pi) = -1 exactly: the closed form ends at eta_min
    }
    {
        TwoGroups o;
        LinearWarmup s(o.sgd, 8, 0.25);
        replay("warmup_const", o.sgd, s);
    }
    {
        TwoGroups o;
        LinearWarmup s(o.sgd, 5, 0.1, std::make_unique<CosineAnnealingLR>(o.sgd, 25));
        replay("warmup_cosine", o.sgd, s);
        CHECK(s.after()->last_epoch() == 25);
    }
    {
        TwoGroups o;
        OneCycleLR s(o.sgd, {.max_lr = {1.0, 0.5}, .total_steps = 30});
        replay("onecycle_sgd", o.sgd, s, [&] { return o.sgd.options(0).momentum; });
        CHECK(o.sgd.options(1).momentum == o.sgd.options(0).momentum);
        CHECK_THROWS_WITH_AS(s.step(), doctest::Contains("total_steps is 30"), Error);
        CHECK(s.last_epoch() == 30);   // a refused step leaves the position
    }
    {
        TwoGroups o;
        OneCycleLR s(o.adam, {.max_lr = {0.01}, .total_steps = 30, .pct_start = 0.25,
                              .anneal_strategy = AnnealStrategy::Linear, .three_phase = true});
        replay("onecycle_adam", o.adam, s, [&] { return o.adam.options(0).betas[0]; });
    }
    {
        TwoGroups o;
        OneCycleLR s(o.sgd, {.max_lr = {0.3}, .total_steps = 30, .pct_start = 0.4, .cycle_momentum = false,
                             .div_factor = 10, .final_div_factor = 100});
        replay("onecycle_nomomentum", o.sgd, s);
        CHECK(o.sgd.options(0).momentum == 0.9);   // untouched
    }
}

TEST_CASE("schedulers: state_dict round-trips the position; load re-applies its lr and momentum") {
    TwoGroups a, b;
    auto make = [](Optimizer& opt) {
        return std::make_unique<LinearWarmup>(opt, 3, 0.1,
                                              std::make_unique<OneCycleLR>(opt, OneCycleOptions{.max_lr = {0.5, 0.2},
                                                                                                .total_steps = 20}));
    };
    auto sa = make(a.sgd);
    for (int i = 0; i < 11; ++i) sa->step();
    // Restore into a fresh optimizer + scheduler through a safetensors file image, scheduler first.
    auto sb = make(b.sgd);
    const auto state = parse_safetensors(serialize_safetensors(sa->state_dict()), "sched").tensors;
    CHECK(state.count("last_epoch") == 1);
    CHECK(state.count("after.last_epoch") == 1);
    CHECK(state.count("base_lrs.1") == 1);
    sb->load_state_dict(state);
    CHECK(sb->last_epoch() == 11);
    for (size_t g = 0; g < 2; ++g) {
        CHECK(b.sgd.lr(g) == a.sgd.lr(g));
        CHECK(b.sgd.options(g).momentum == a.sgd.options(g).momentum);
    }
    for (int i = 0; i < 9; ++i) {
        sa->step();
        sb->step();
        CHECK(sb->get_last_lr() == sa->get_last_lr());
        CHECK(b.sgd.options(0).momentum == a.sgd.options(0).momentum);
    }
    CHECK_THROWS_WITH_AS(sb->load_state_dict({{"epoch", Tensor::zeros({}, DType::I64)}}),
                         doctest::Contains("unknown key 'epoch'"), Error);
    // a position no run reaches (step() would overflow int64 at 2^63 - 1) is refused
    CHECK_THROWS_WITH_AS(sb->load_state_dict({{"last_epoch", Tensor::from_vector_i64({}, {INT64_MAX})}}),
                         doctest::Contains("at most 2^53, got 9223372036854775807"), Error);
    CHECK(sb->last_epoch() == 20);
}

TEST_CASE("schedulers: LinearWarmup without warmup steps is the scheduler it hands over to") {
    TwoGroups a, b;
    LinearWarmup w(a.sgd, 0, 0.5, std::make_unique<StepLR>(a.sgd, 2, 0.5));
    StepLR s(b.sgd, 2, 0.5);
    for (int i = 0; i < 6; ++i) {
        CHECK(a.sgd.lrs() == b.sgd.lrs());
        w.step();
        s.step();
    }
}

TEST_CASE("schedulers: bad arguments name the scheduler, the value and a hint") {
    TwoGroups o;
    CHECK_THROWS_WITH_AS(StepLR(o.sgd, 0), doctest::Contains("StepLR: step_size must be > 0, got 0"), Error);
    CHECK_THROWS_WITH_AS(CosineAnnealingLR(o.sgd, -1), doctest::Contains("T_max must be > 0"), Error);
    CHECK_THROWS_WITH_AS(LinearWarmup(o.sgd, 5, 1.5), doctest::Contains("start_factor must be in [0, 1], got 1.5"),
                         Error);
    CHECK_THROWS_WITH_AS(OneCycleLR(o.sgd, {.max_lr = {1, 2, 3}, .total_steps = 10}),
                         doctest::Contains("expected 1 or 2 values for max_lr"), Error);
    CHECK_THROWS_WITH_AS(OneCycleLR(o.sgd, {.max_lr = {1}, .total_steps = 0}),
                         doctest::Contains("total_steps must be > 0"), Error);
    CHECK_THROWS_WITH_AS(OneCycleLR(o.sgd, {.max_lr = {1}, .total_steps = 3}),   // 0.3 * 3 - 1 < 0: empty phase
                         doctest::Contains("pct_start * total_steps must be > 1"), Error);
    TwoGroups other;
    CHECK_THROWS_WITH_AS(LinearWarmup(o.sgd, 2, 0.5, std::make_unique<StepLR>(other.sgd, 2)),
                         doctest::Contains("drives another optimizer"), Error);
}

TEST_CASE("schedulers: one_cycle_for_any_length keeps PyTorch's cycle where it exists and makes one for 1-3 steps") {
    // Unchanged where OneCycleLR accepts the options (the cycle is PyTorch's).
    for (int64_t T : {4, 10, 30, 1000}) {
        const OneCycleOptions o = one_cycle_for_any_length({.max_lr = {1}, .total_steps = T});
        CHECK(o.total_steps == T);
        CHECK(o.pct_start == 0.3);
    }
    CHECK(one_cycle_for_any_length({.max_lr = {1}, .total_steps = 30, .pct_start = 0.25, .three_phase = true})
              .pct_start == 0.25);
    // 3 steps at 0.3 (refused by OneCycleLR, as PyTorch): initial, max, min lr.
    {
        TwoGroups g;
        const OneCycleOptions o =
            one_cycle_for_any_length({.max_lr = {1}, .total_steps = 3, .cycle_momentum = false});
        CHECK(o.pct_start == doctest::Approx(2.0 / 3));
        OneCycleLR s(g.sgd, o);
        CHECK(s.lr_at(0, 0) == doctest::Approx(1.0 / 25));
        CHECK(s.lr_at(1, 0) == doctest::Approx(1.0));
        CHECK(s.lr_at(2, 0) == doctest::Approx(1.0 / 25 / 1e4));
        for (int i = 0; i < 3; ++i) s.step();   // the loop's last step lands on total_steps
        CHECK_THROWS_AS(s.step(), Error);
    }
    // 1 and 2 steps, two and three phases: every lr is finite and within [min_lr, max_lr].
    for (bool three : {false, true})
        for (int64_t T : {1, 2, 3}) {
            INFO("T = ", T, " three_phase = ", three);
            TwoGroups g;
            OneCycleLR s(g.sgd, one_cycle_for_any_length({.max_lr = {1}, .total_steps = T, .cycle_momentum = false,
                                                          .three_phase = three}));
            CHECK(s.get_last_lr()[0] == doctest::Approx(1.0 / 25));   // the first step's lr: the initial one
            for (int64_t t = 0; t < T; ++t) {
                const double lr = s.lr_at(t, 0);
                CHECK(std::isfinite(lr));
                CHECK(lr >= 1.0 / 25 / 1e4 * (1 - 1e-12));
                CHECK(lr <= 1.0 * (1 + 1e-12));
            }
        }
}
