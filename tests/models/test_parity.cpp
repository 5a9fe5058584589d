// tests/models/test_parity.cpp -- ResNet-20, a depth-2 ViT-Tiny and torchvision's resnet18/34/50, mobilenet_v2 and a
// 2-layer vit_s_16 against PyTorch with identical weights.
//
// Both sides fill every parameter and buffer from a hash of its key (tests/models/hashed.h), run a train-mode
// forward + cross-entropy backward, then an eval-mode one, and compare logits, loss, the BN running statistics
// after the train step, and every parameter gradient: a strided sample of <= 64 elements per tensor plus
// [sum g, sum g r, sum |g|] over the whole tensor (r a hashed +-1 probe). The fixture's references are float64.
//
// Tolerance: 1e-4, relative to the scale of the compared tensor: |got - ref| <= 1e-4 * (|ref| + max |ref|) for
// logits and gradient samples, and <= 1e-4 * sum |g| for the sums. float32 razor against a float64 reference
// measures at most ~1e-6 of that scale (printed by the test).
#include <cmath>
#include <optional>

#include "models/hashed.h"
#include "models/mobilenet.h"
#include "models/registry.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {

// Worst |got - ref| / (|ref| + scale) over the elements; scale = max |ref|, at least `floor` (a gradient sample
// that is all zeros in the reference is compared against its tensor's mean |g| instead of against nothing: a conv's
// summation order, Winograd's transforms in particular, turns an exact 0 into ~1e-9 of the gradient's scale).
double worst_error(const std::vector<float>& got, const std::vector<float>& ref, double floor = 0) {
    REQUIRE(got.size() == ref.size());
    double scale = floor, worst = 0;
    for (float v : ref) scale = std::max(scale, std::abs(double(v)));
    for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(double(got[i]) - ref[i]) / (std::abs(double(ref[i])) + scale + 1e-30));
    return worst;
}

// train_grad_tolerance = nullopt: the train-mode gradients are not compared (logits, loss and BN statistics still
// are), for a network whose train-mode backward is so ill-conditioned on hashed weights that float32 cannot reproduce
// float64; a looser value for one whose ReLU kinks sit inside float32's rounding (see mobilenet_v2 below).
//
// A parameter whose reference gradient is analytically zero (float64 gives ~1e-16 of the model's largest gradient: a
// BN bias whose output only reaches a train-mode BN through a conv, which removes every per-channel mean) has no scale
// of its own to compare against; its gradient must instead be zero to 1e-6 of the model's largest sum |g|.
void run_parity(std::shared_ptr<nn::Module> model, const std::string& fixture, int64_t S, int64_t batch,
                const std::vector<std::string>& bn_paths, std::optional<double> train_grad_tolerance = 1e-4,
                double eval_grad_tolerance = 1e-4) {
    const SafeTensors f = test::load_fixture(fixture);
    const auto& ref = f.tensors;
    const double checksum = test::fill_hashed(*model);
    CHECK(checksum == doctest::Approx(ref.at("weights_checksum").item()).epsilon(1e-6));
    const Tensor x = test::hashed_value("input", {batch, 3, S, S});
    const Tensor labels = ref.at("labels");

    double worst_logits = 0, worst_grad = 0, worst_sum = 0;
    for (const std::string mode : {"train", "eval"}) {
        INFO(fixture, " ", mode);
        model->train(mode == "train");
        model->zero_grad();
        const Tensor logits = (*model)(x);
        const Tensor loss = cross_entropy(logits, labels);
        loss.backward();

        const double e = worst_error(logits.to_vector(), ref.at(mode + ".logits").to_vector());
        CHECK_MESSAGE(e <= 1e-4, "logits error ", e);
        worst_logits = std::max(worst_logits, e);
        CHECK(loss.item() == doctest::Approx(ref.at(mode + ".loss").item()).epsilon(1e-4));

        double largest_abs_sum = 0;   // over the model's parameters, from the reference
        for (const auto& [name, p] : model->named_parameters())
            largest_abs_sum = std::max<double>(largest_abs_sum, ref.at(mode + ".gsum." + name).to_vector()[2]);
        for (const auto& [name, p] : model->named_parameters()) {
            INFO(name);
            REQUIRE(p.grad().defined());
            if (mode == "train" && !train_grad_tolerance) continue;
            const double tolerance = mode == "eval" ? eval_grad_tolerance : *train_grad_tolerance;
            const std::vector<float> g = p.grad().to_vector();
            if (ref.at(mode + ".gsum." + name).to_vector()[2] <= 1e-12 * largest_abs_sum) {   // analytically zero
                double abs_sum = 0;
                for (float v : g) abs_sum += std::abs(v);
                CHECK_MESSAGE(abs_sum <= 1e-6 * largest_abs_sum, "a zero gradient came out as sum |g| = ", abs_sum);
                continue;
            }
            const int64_t n = static_cast<int64_t>(g.size()), stride = std::max<int64_t>(1, (n + 63) / 64);
            std::vector<float> sample;
            for (int64_t i = 0; i < n; i += stride) sample.push_back(g[i]);
            const double mean_abs = ref.at(mode + ".gsum." + name).to_vector()[2] / static_cast<double>(n);
            const double eg = worst_error(sample, ref.at(mode + ".grad." + name).to_vector(), mean_abs);
            CHECK_MESSAGE(eg <= tolerance, "gradient sample error ", eg);
            worst_grad = std::max(worst_grad, eg);

            double sum = 0, dot = 0, abs_sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += g[i], dot += g[i] * test::probe_sign(name, i), abs_sum += std::abs(g[i]);
            const std::vector<float> r = ref.at(mode + ".gsum." + name).to_vector();   // [sum, dot, sum |g|]
            const double scale = std::max<double>(r[2], 1e-30);
            const double es = std::max({std::abs(sum - r[0]), std::abs(dot - r[1]), std::abs(abs_sum - r[2])}) / scale;
            CHECK_MESSAGE(es <= tolerance, "gradient sums error ", es, " (sum ", sum, " vs ", r[0], ", dot ", dot, " vs ",
                          r[1], ", |g| ", abs_sum, " vs ", r[2], ")");
            worst_sum = std::max(worst_sum, es);
        }
        if (mode == "train") {
            const auto state = model->state_dict();
            for (const auto& path : bn_paths) {
                for (const std::string stat : {"running_mean", "running_var"})
                    test::check_close(state.at(path + "." + stat), ref.at("after_train." + path + "." + stat), 1e-4,
                                      1e-5, path + "." + stat);
                CHECK(state.at(path + ".num_batches_tracked").to_vector_i64()[0] == 1);
            }
        }
    }
    MESSAGE(fixture, ": worst relative error logits ", worst_logits, ", gradient samples ", worst_grad,
            ", gradient sums ", worst_sum);
}

std::shared_ptr<nn::Module> zoo_model(const std::string& name, const models::ModelOptions& options = {}) {
    Generator gen(0);
    return models::make_model(name, 10, gen, options);
}

}  // namespace

TEST_CASE("models: resnet20 matches PyTorch (logits, loss, BN statistics, every gradient; train and eval)") {
    run_parity(zoo_model("resnet20"), "models_resnet20", 32, 4, {"bn1", "layer3.2.bn2"});
}

TEST_CASE("models: torchvision's resnet18 matches torchvision at 64x64 (logits, loss, BN statistics, every gradient)" *
          doctest::test_suite("model-scale")) {
    run_parity(zoo_model("resnet18"), "models_tv_resnet18", 64, 2, {"bn1", "layer4.1.bn2"});
}

// Train-mode gradients are not compared: one ReLU of the reference sits on its kink. layer2.2's residual sum at
// [0, 120, 0, 5] is 3.5e-6 in float64 (values O(1) around it, so within float32's rounding of BN + add), and its
// upstream gradient is 18 % of that tensor's largest. The generic family rounds the sum to <= 0, masks that element,
// and every gradient below layer2.2 moves by up to 5.5e-2 of its scale (measured: gradient w.r.t. layer2.2.conv2's
// output 1.4e-1 off, w.r.t. layer2.2's output 2.9e-5); avx2 and avx512 keep the element (worst 4.3e-5). That is
// the mask's discontinuity, not a kernel fault. Logits, loss, BN statistics and eval-mode gradients are compared.
TEST_CASE("models: torchvision's resnet34 matches torchvision at 64x64 (logits, loss, BN statistics, eval-mode "
          "gradients)" * doctest::test_suite("model-scale")) {
    run_parity(zoo_model("resnet34"), "models_tv_resnet34", 64, 2, {"bn1", "layer3.5.bn2", "layer4.0.downsample.1"},
               /*train_grad_tolerance=*/std::nullopt);
}

// Train-mode gradients of resnet50 on hashed weights are chaotic: 16 blocks whose hashed BN scales (0.75-1.25) and
// weights make the gradient grow ~10^4-fold towards the stem, through train-mode BN over 8 values per channel at
// layer4. PyTorch's own float32 gradients then differ from its float64 ones by up to 23 % (measured: the worst
// max-relative error over all parameters, batch 2 at 64 px; 20 % at batch 4, 96 px), so no float32 implementation can
// meet 1e-4 there; they are not compared.
// Eval-mode gradients after the train step sit on ReLU kinks: in float64, layer1.0's ReLU has an input at 2.6e-8 of
// its tensor's largest and layer3.5's at 5.4e-8, inside float32's rounding of conv + BN, so whichever way an
// implementation rounds them flips a mask and moves the gradients below. PyTorch's own float32 run (this test's
// metric, against the same float64 fixture) meets 1e-4 only on the exact input: on the input perturbed in its last
// bit, x (1 + 2^-24 n), n ~ N(0, 1), 4 of 7 perturbations missed, worst 9.9e-3 (samples) and 1.5e-3 (sums). razor's
// kernel families land on either side the same way: avx512 7.8e-6, generic 9.9e-3 (PyTorch's 9.9e-3 to two digits),
// avx2 in an AVX2-baseline build 5.6e-3 (PyTorch's 5.6e-3 on another perturbation).
// So eval-mode gradients are compared at 3e-2, three times PyTorch's worst: a wiring fault (a block's stride on the
// wrong conv, a missing downsample, a swapped BN) moves them by O(1). The kernels' accuracy is held to 1e-4 by the
// op tests and by the other models' comparisons here.
TEST_CASE("models: torchvision's resnet50 matches torchvision at 64x64 (Bottleneck v1.5, downsample, BN statistics, "
          "eval-mode gradients)" * doctest::test_suite("model-scale")) {
    run_parity(zoo_model("resnet50"), "models_tv_resnet50", 64, 2, {"bn1", "layer4.2.bn3", "layer2.0.downsample.1"},
               /*train_grad_tolerance=*/std::nullopt, /*eval_grad_tolerance=*/3e-2);
}

TEST_CASE("models: torchvision's ViT layout (vit_s_16, 2 layers, 224 px) matches torchvision (logits, every gradient)" *
          doctest::test_suite("model-scale")) {
    run_parity(zoo_model("vit_s_16", {.image_size = 224, .depth = 2}), "models_tv_vit_s_16", 224, 2, {});
}

// Train-mode gradients: razor's worst error is 4.2e-5 (avx512 and avx2, 2 threads or 1) and 4.8e-5 (generic in an
// AVX-512-baseline build), PyTorch's own float32 4.8e-5. The margin is thin for a structural reason: 13 ReLU6 inputs
// of the reference lie within 1e-5 of a kink (0 or 6), and where float32 rounding flips one the gradients below it
// move. PyTorch float32 on the input perturbed in its last bit (x (1 + 2^-24 n), n ~ N(0, 1)) exceeded 1e-4 for 3 of
// 8 perturbations (2e-3, 5.4e-3, 5.4e-3), float64 on the same inputs never (<= 1.8e-5). The generic family in an
// AVX2-baseline build (Eigen's GEMM compiled for AVX2, as on CI's Zen 3) flips one: element 10586 of
// features.17.conv.1's ReLU6 input comes out -3.3e-6 where the avx2 family gives +1.3e-6, and with 18 values per
// channel in that train-mode BN every gradient below it moves by up to 2.4e-2 of its scale. That is the mask's
// discontinuity, not a kernel fault (the same build's eval-mode gradients meet 1e-4). So train-mode gradients are
// compared at 5e-2, twice that flip: a wiring fault (a stride on the wrong conv, a missing residual, ReLU6 where the
// projection has none) moves them by O(1); the kernels' accuracy is held to 1e-4 by the op tests, the eval-mode
// gradients here and the other models' comparisons.
TEST_CASE("models: torchvision's mobilenet_v2 matches torchvision at 96x96 (ReLU6, depthwise, BN statistics, "
          "every gradient)") {
    Generator gen(0);
    auto model = std::make_shared<models::MobileNetV2>(models::MobileNetV2Config{.dropout = 0.f}, 10, gen);
    run_parity(model, "models_tv_mobilenet_v2", 96, 2, {"features.0.1", "features.17.conv.3"},
               /*train_grad_tolerance=*/5e-2);
}

TEST_CASE("models: vit_tiny (depth 2) matches PyTorch (logits, loss, every gradient; train and eval)") {
    run_parity(zoo_model("vit_tiny", {.depth = 2}), "models_vit", 32, 2, {});
}
