// tests/models/test_trajectory.cpp -- 10 training steps of razor against PyTorch from identical weights.
//
// Fixtures trajectory_resnet20 and trajectory_vit (scripts/fixtures/ops_trajectory.py). Both sides fill every
// parameter and buffer from a hash of its key (tests/models/hashed.h), take one fixed batch (the hashed "input",
// labels 3i mod 10) and run 10 steps in train mode (BN on batch statistics), each zero_grad, forward,
// cross-entropy, backward, step:
//   resnet20, batch 8, optim::SGD(lr 0.1, momentum 0.9, nesterov, weight_decay 5e-4)
//   vit_tiny depth 2, batch 4, optim::AdamW(lr 1e-3, weight_decay 0.05)
// Compared: every step's loss, an eval-mode loss after the 10 steps (weights and BN running statistics), and for
// a dozen tensors the change d = value - initial value as [sum d, sum d*r, sum |d|] (r a hashed +-1 probe) after
// the first step and after the tenth (errors relative to sum |d|).
//
// The reference is PyTorch in float64; the fixture also holds PyTorch's own float32 run ("f32.*"), the witness of
// how far a correct float32 run can drift. Tolerances (measured figures are printed by the tests):
// - vit_tiny + AdamW: steps 0-1 and the first step's checksums within 1e-4 relative; steps 2-9, the eval loss and
//   the final checksums within the float32 envelope below. AdamW's first steps move every weight by about
//   lr * g / |g|, so a gradient element whose float32 rounding is comparable to its size moves its weight by up to
//   lr either way. With Eigen's GEMM the losses stayed <= 5.2e-5 (PyTorch float32: <= 5.1e-5); razor's AVX-512
//   GEMM, as accurate as Eigen on random products (rms relative error 2.7-2.9e-7 against Eigen's 2.5-4.2e-7 on
//   the ViT and conv shapes), gave 2.8e-5 at step 1, then 1.16e-4 and 1.08e-4 at steps 2-3 and <= 5.4e-5 after:
//   the same float32 chaos as resnet20's below, only smaller.
// - resnet20 + SGD at lr 0.1 on one batch is chaotic in float32: each step has ~1.5M ReLU inputs, a few within
//   1e-8 of zero, so rounding flips some masks, and lr 0.1 with Nesterov momentum amplifies the difference ~10x
//   per step once the net starts memorising the batch. PyTorch's own float32 run leaves the float64 trajectory by
//   2.2e-4 at step 1 (one flipped mask in layer3.2) and by 1e-2..1e-1 by steps 5-9 (measured on five batches, at
//   batch 8 and 32). So steps 0-2 and the first step's checksums, which pin the SGD update itself (momentum,
//   Nesterov, weight decay, lr), must be within 1e-4 of one of the two correct float32 outcomes: the float64 path
//   (razor's direct convs: 0, 0, 4.5e-5; checksums 2.2e-6) or PyTorch float32's, flipped mask included (razor's
//   Winograd convs flip the same mask: loss errors against float64 0, 2.2e-4, 7.9e-3, against PyTorch float32
//   below 1e-6; checksums 4.2e-3 against float64, the same as PyTorch float32's own). Steps 3-9 must lie
//   within max(1e-4, 10 x PyTorch float32's largest deviation so far), the eval loss likewise, and the final
//   checksums within max(1e-4, 3 x PyTorch float32's): an envelope that says "still on the reference loss curve",
//   not parity. (Measured in float64 against this envelope: no Nesterov, dampening 0.1 and lr 0.09 fall outside
//   it from step 1; weight_decay 0 differs by 3.4e-4 at step 2, outside the 1e-4 there.)
// The resnet20 run takes ~5-10 s on 2 loaded cores, so it is in the "slow" suite; the ViT run takes ~2 s.
#include <cmath>
#include <functional>

#include "models/hashed.h"
#include "models/registry.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {

constexpr int kSteps = 10;

struct Run {
    std::vector<double> losses;
    double eval_loss = 0;
    std::map<std::string, std::array<double, 3>> deltas;   // key -> [sum d, sum d r, sum |d|] after 10 steps
    std::map<std::string, std::array<double, 3>> deltas1;  // the same after the first step
    std::map<std::string, Tensor> state;
};

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(optim::NamedParameters)>;

// The training run of the fixture, on razor. `checked`: the keys whose change is summarised.
Run train(const std::string& model_name, const models::ModelOptions& options, const Tensor& labels,
          const std::vector<std::string>& checked, const MakeOptimizer& make_optimizer) {
    Generator gen(0);
    auto model = models::make_model(model_name, 10, gen, options);
    test::fill_hashed(*model);
    std::map<std::string, std::vector<float>> initial;
    for (const auto& key : checked) initial[key] = model->state_dict().at(key).to_vector();

    const int64_t batch = labels.numel();
    const Tensor x = test::hashed_value("input", {batch, 3, 32, 32});
    auto opt = make_optimizer(model->named_parameters());
    const auto summarise = [&](std::map<std::string, std::array<double, 3>>& out) {
        const auto state = model->state_dict();
        for (const auto& key : checked) {
            const std::vector<float> now = state.at(key).to_vector();
            std::array<double, 3> s{0, 0, 0};
            for (size_t i = 0; i < now.size(); ++i) {
                const double d = double(now[i]) - initial[key][i];
                s[0] += d, s[1] += d * test::probe_sign(key, static_cast<int64_t>(i)), s[2] += std::abs(d);
            }
            out[key] = s;
        }
    };
    Run run;
    model->train();
    for (int step = 0; step < kSteps; ++step) {
        opt->zero_grad();
        const Tensor loss = cross_entropy((*model)(x), labels);
        loss.backward();
        opt->step();
        run.losses.push_back(loss.item());
        if (step == 0) summarise(run.deltas1);
    }
    model->eval();
    {
        NoGradGuard no_grad;
        run.eval_loss = cross_entropy((*model)(x), labels).item();
    }
    summarise(run.deltas);
    run.state = model->state_dict();
    return run;
}

std::vector<std::string> checked_keys(const SafeTensors& f) {
    std::vector<std::string> keys;
    for (const auto& [name, t] : f.tensors)
        if (name.rfind("delta.", 0) == 0) keys.push_back(name.substr(6));
    return keys;
}

double rel(double got, double ref) { return std::abs(got - ref) / std::abs(ref); }

// The acceptance tolerance (1e-4 per step) holds for the optimised builds razor ships. Sanitizer builds compile the
// kernels at another optimisation level, so float32 sums run in other orders and AdamW's early steps (where
// m / sqrt(v) amplifies rounding) drift further: measured 1.2e-4 at step 2 of the ViT run. They check memory
// safety, not this bound, so they get 5e-4.
const double kStrict = sanitized_build() ? 5e-4 : 1e-4;

// Worst |got - ref| over the three checksums, relative to the reference sum |d|.
double checksum_error(const std::array<double, 3>& got, const std::vector<float>& ref) {
    return std::max({std::abs(got[0] - ref[0]), std::abs(got[1] - ref[1]), std::abs(got[2] - ref[2])}) /
           std::max<double>(ref[2], 1e-30);
}

// Compares a run against the fixture: the losses of steps < strict_steps within 1e-4, later ones, the eval loss
// and the final checksums within the float32 envelope of the file comment; the first step's change checksums
// within 1e-4. Returns a one-line summary of the measured errors.
std::string compare(const Run& run, const SafeTensors& f, int strict_steps) {
    const auto& t = f.tensors;
    const std::vector<float> ref = t.at("losses").to_vector(), ref32 = t.at("f32.losses").to_vector();
    REQUIRE(ref.size() == kSteps);
    double floor32 = 0, worst = 0, worst_strict = 0;
    std::string per_step;
    for (int k = 0; k < kSteps; ++k) {
        floor32 = std::max(floor32, rel(ref32[k], ref[k]));
        const bool strict = k < strict_steps;
        // Strict steps: within 1e-4 of either correct float32 outcome -- the float64 path, or PyTorch float32's
        // where that flipped a near-zero ReLU mask (see the file comment).
        const double e = strict ? std::min(rel(run.losses[k], ref[k]), rel(run.losses[k], ref32[k]))
                                : rel(run.losses[k], ref[k]);
        const double tol = strict ? kStrict : std::max(kStrict, 10 * floor32);
        INFO("step ", k, ": razor ", run.losses[k], ", torch float64 ", ref[k], ", torch float32 ", ref32[k]);
        CHECK_MESSAGE(e <= tol, "relative error ", e, " > tolerance ", tol);
        if (tol == kStrict) worst_strict = std::max(worst_strict, e);
        worst = std::max(worst, e);
        per_step += fmt(k ? " " : "", e);
    }
    const double eval_ref = t.at("eval_loss").item(), eval32 = t.at("f32.eval_loss").item();
    const double eval_tol = std::max(kStrict, 10 * std::max(floor32, rel(eval32, eval_ref)));
    const double eval_err = rel(run.eval_loss, eval_ref);
    CHECK_MESSAGE(eval_err <= eval_tol, "eval loss ", run.eval_loss, " vs ", eval_ref, " (float32 torch ", eval32,
                  "): relative error ", eval_err, " > ", eval_tol);

    double worst_sum[2] = {0, 0}, worst_sum32[2] = {0, 0};
    for (int final = 0; final < 2; ++final) {
        const std::string prefix = final ? "delta." : "step1.delta.";
        for (const auto& [key, got] : final ? run.deltas : run.deltas1) {
            const std::vector<float> r = t.at(prefix + key).to_vector(), r32 = t.at("f32." + prefix + key).to_vector();
            const double floor = checksum_error({r32[0], r32[1], r32[2]}, r);
            const double tol = final ? std::max(kStrict, 3 * floor) : kStrict;
            const std::vector<float> r32_sums = {r32[0], r32[1], r32[2]};
            const double e = final ? checksum_error(got, r)   // first step: either float32 outcome, as the losses
                                   : std::min(checksum_error(got, r), checksum_error(got, r32_sums));
            CHECK_MESSAGE(e <= tol, prefix, key, ": checksums [", got[0], ", ", got[1], ", ", got[2], "] vs [", r[0],
                          ", ", r[1], ", ", r[2], "]: error ", e, " of sum |d| > ", tol, " (float32 torch ", floor, ")");
            worst_sum[final] = std::max(worst_sum[final], e), worst_sum32[final] = std::max(worst_sum32[final], floor);
        }
    }
    return fmt("loss errors per step [", per_step, "] (worst where held to the strict tolerance: ", worst_strict, ", overall ",
               worst, "; torch float32 up to ", floor32, "), eval loss ", eval_err, ", change checksums after step 1 ",
               worst_sum[0], " (torch float32 ", worst_sum32[0], "), after step 10 ", worst_sum[1], " (torch float32 ",
               worst_sum32[1], ")");
}

Tensor labels_of(const SafeTensors& f) { return f.tensors.at("labels"); }

}  // namespace

TEST_CASE("trajectory: resnet20, 10 SGD steps (momentum 0.9, nesterov, wd 5e-4, lr 0.1) track PyTorch" *
          doctest::test_suite("slow")) {
    const SafeTensors f = test::load_fixture("trajectory_resnet20");
    const Run run = train("resnet20", {}, labels_of(f), checked_keys(f), [](optim::NamedParameters p) {
        return std::make_unique<optim::SGD>(
            std::move(p), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
    });
    MESSAGE("resnet20 + SGD: ", compare(run, f, 3));
    for (const auto& [key, t] : run.state)
        if (key.find("num_batches_tracked") != std::string::npos) CHECK(t.to_vector_i64()[0] == kSteps);
}

TEST_CASE("trajectory: vit_tiny (depth 2), 10 AdamW steps (lr 1e-3, wd 0.05) track PyTorch") {
    const SafeTensors f = test::load_fixture("trajectory_vit");
    const Run run = train("vit_tiny", {.depth = 2}, labels_of(f), checked_keys(f), [](optim::NamedParameters p) {
        return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.05});
    });
    MESSAGE("vit_tiny + AdamW: ", compare(run, f, 2));
}
