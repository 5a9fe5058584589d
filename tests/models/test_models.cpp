// tests/models/test_models.cpp -- the model zoo: exact parameter counts, a forward + backward of every model,
// state-dict keys against the PyTorch reference definitions, registry errors, and razor info's summary.
#include <cmath>
#include <set>

#include "models/lenet.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "models/registry.h"
#include "models/summary.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {

struct ZooEntry {
    std::string fixture;   // models_keys_<fixture>
    std::string name;      // registry name
    models::ModelOptions options;
    int64_t params;        // exact, 10 classes (docs/models.md)
};

const std::vector<ZooEntry>& zoo() {
    static const std::vector<ZooEntry> z = {
        {"mlp", "mlp", {}, 4'206'602},
        {"lenet5", "lenet5", {}, 62'006},
        {"lenet5_1x28x28", "lenet5", {.in_channels = 1, .image_size = 28}, 61'706},
        {"resnet20", "resnet20", {}, 269'722},
        {"resnet32", "resnet32", {}, 464'154},
        {"resnet56", "resnet56", {}, 853'018},
        {"resnet32x2", "resnet32x2", {}, 1'860'522},
        {"vgg16_bn", "vgg16_bn", {}, 14'724'042},
        {"vgg19_bn", "vgg19_bn", {}, 20'035'018},
        {"vit_tiny", "vit_tiny", {}, 5'362'762},
        {"resnet18", "resnet18", {.image_size = 64}, 11'181'642},   // torchvision's 11,689,512 at 1000 classes
        {"resnet34", "resnet34", {.image_size = 64}, 21'289'802},   // 21,797,672
        {"resnet50", "resnet50", {.image_size = 64}, 23'528'522},   // 25,557,032
        {"mobilenet_v2", "mobilenet_v2", {.image_size = 64}, 2'236'682},   // torchvision's 3,504,872 at 1000
        {"vit_b_16", "vit_b_16", {.image_size = 224}, 85'806'346},  // torchvision's 86,567,656 at 1000 classes
        {"vit_s_16", "vit_s_16", {.image_size = 224}, 21'669'514},
    };
    return z;
}

}  // namespace

TEST_CASE("models: exact parameter counts; state-dict keys, order and shapes equal the PyTorch reference definitions" *
          doctest::test_suite("model-scale")) {
    for (const auto& e : zoo()) {
        INFO(e.fixture);
        Generator gen(0);
        auto model = models::make_model(e.name, 10, gen, e.options);
        CHECK(model->num_parameters() == e.params);   // docs/baselines.md §2.1, docs/vr-pge.md §9
        const SafeTensors ref = test::load_fixture("models_keys_" + e.fixture);
        // fixture entry: key -> [kind (0 parameter, 1 buffer), index in named_parameters/named_buffers, *shape]
        std::vector<std::string> ref_params, ref_buffers;
        std::map<std::string, Shape> ref_shapes;
        for (const auto& [key, t] : ref.tensors) {
            const std::vector<int64_t> v = t.to_vector_i64();
            auto& list = v[0] == 0 ? ref_params : ref_buffers;
            if (list.size() <= static_cast<size_t>(v[1])) list.resize(v[1] + 1);
            list[v[1]] = key;
            ref_shapes[key] = Shape(v.begin() + 2, v.end());
        }
        std::vector<std::string> params, buffers;
        for (const auto& [key, t] : model->named_parameters()) {
            params.push_back(key);
            CHECK_MESSAGE(ref_shapes[key] == t.shape(), key, ": ", shape_str(t.shape()), " vs torch ",
                          shape_str(ref_shapes[key]));
        }
        for (const auto& [key, t] : model->named_buffers()) {
            buffers.push_back(key);
            CHECK_MESSAGE(ref_shapes[key] == t.shape(), key);
            if (key.ends_with("num_batches_tracked")) CHECK(t.dtype() == DType::I64);
        }
        CHECK(params == ref_params);
        CHECK(buffers == ref_buffers);
        CHECK(model->state_dict().size() == ref.tensors.size());
    }
}

TEST_CASE("models: parameter counts of the variants (ViT depth 6, MLP on 28x28, 100 classes)") {
    Generator gen(0);
    CHECK(models::make_model("vit_tiny", 10, gen, {.depth = 6})->num_parameters() == 2'693'578);
    CHECK(models::make_model("mlp", 10, gen, {.in_channels = 1, .image_size = 28})->num_parameters() == 1'863'690);
    CHECK(models::make_model("resnet20", 100, gen)->num_parameters() == 269'722 + 90 * 65);
}

namespace {
// Train-mode forward at batch 2, cross-entropy backward (every parameter gets a gradient of its shape, the tape
// empties), then an eval-mode forward.
void forward_backward(const ZooEntry& e) {
    INFO(e.fixture);
    Generator gen(1);
    auto model = models::make_model(e.name, 7, gen, e.options);
    Generator data(2);
    const int64_t S = e.options.image_size;
    Tensor x = Tensor::randn({2, e.options.in_channels, S, S}, data);
    Tensor logits = (*model)(x);
    REQUIRE(logits.shape() == Shape{2, 7});
    for (float v : logits.to_vector()) CHECK(std::isfinite(v));
    cross_entropy(logits, Tensor::from_vector_i64({2}, {1, 6})).backward();
    for (const auto& [name, p] : model->named_parameters()) {
        INFO(name);
        REQUIRE(p.grad().defined());
        CHECK(p.grad().shape() == p.shape());
    }
    CHECK(current_tape().live().items == 0);
    model->eval();
    NoGradGuard no_grad;
    CHECK((*model)(x).shape() == Shape{2, 7});
}
bool is_large(const ZooEntry& e) { return e.params > 1'000'000 && e.name != "mlp"; }
}  // namespace

TEST_CASE("models: the small models run forward and backward on a tiny batch; every parameter gets a gradient") {
    for (const auto& e : zoo())
        if (!is_large(e)) forward_backward(e);
}

TEST_CASE("models: the large models (resnet32x2, vgg16_bn, vgg19_bn, vit_tiny) run forward and backward" *
          doctest::test_suite("slow")) {
    for (const auto& e : zoo())
        if (is_large(e)) forward_backward(e);
}

TEST_CASE("models: the large models' logits have the right shape (no-grad forward, batch 1)" *
          doctest::test_suite("model-scale")) {
    for (const auto& e : zoo()) {
        if (!is_large(e)) continue;
        INFO(e.fixture);
        Generator gen(1);
        auto model = models::make_model(e.name, 7, gen, e.options);
        NoGradGuard no_grad;
        const int64_t S = e.options.image_size;
        CHECK((*model)(Tensor::ones({1, 3, S, S})).shape() == Shape{1, 7});
    }
}

TEST_CASE("models: registry names and errors") {
    CHECK(models::model_names() == std::vector<std::string>{"mlp", "lenet5", "resnet20", "resnet32", "resnet56",
                                                           "resnet32x2", "vgg16_bn", "vgg19_bn", "resnet18",
                                                           "resnet34", "resnet50", "mobilenet_v2", "vit_b_16",
                                                           "vit_s_16", "vit_tiny"});
    Generator gen(0);
    CHECK_THROWS_WITH_AS(models::make_model("resnet101", 10, gen),
                         doctest::Contains("make_model: unknown model 'resnet101'; valid names: mlp, lenet5, resnet20, "
                                           "resnet32, resnet56, resnet32x2, vgg16_bn, vgg19_bn, resnet18, resnet34, "
                                           "resnet50, mobilenet_v2, vit_b_16, vit_s_16, vit_tiny"),
                         Error);
    CHECK_THROWS_WITH_AS(models::make_model("vgg19_bn", 10, gen, {.in_channels = 1, .image_size = 28}),
                         doctest::Contains("needs 32x32 images, got 28x28"), Error);
    CHECK_THROWS_WITH_AS(models::make_model("resnet20", 10, gen, {.depth = 3}),
                         doctest::Contains("depth applies to the ViTs only"), Error);
    CHECK_THROWS_WITH_AS(models::make_model("mlp", 0, gen), doctest::Contains("num_classes must be >= 1, got 0"), Error);
    CHECK_THROWS_AS(models::make_model("lenet5", 10, gen, {.image_size = 8}), Error);
    auto vit = models::make_model("vit_tiny", 10, gen, {.depth = 1});
    CHECK_THROWS_WITH_AS((*vit)(Tensor::zeros({1, 3, 28, 28})), doctest::Contains("expected input (B, 3, 32, 32)"), Error);
}

TEST_CASE("models: resnet option-A shortcut subsamples and zero-pads channels; option B projects") {
    Generator gen(0);
    models::PadShortcut sc(16, 32, 2);
    Tensor x = test::randn_leaf({2, 16, 6, 6}, 3);
    Tensor y = sc(x);
    REQUIRE(y.shape() == Shape{2, 32, 3, 3});
    // channel 8 + c of y is x[:, c, ::2, ::2]; channels [0, 8) and [24, 32) are zero
    CHECK(y.to_vector()[(0 * 32 + 8) * 9 + 4] == x.to_vector()[(0 * 16 + 0) * 36 + 2 * 6 + 2]);
    CHECK(y.to_vector()[(1 * 32 + 23) * 9 + 8] == x.to_vector()[(1 * 16 + 15) * 36 + 4 * 6 + 4]);
    for (int64_t c : {0, 7, 24, 31}) CHECK(y.to_vector()[(1 * 32 + c) * 9 + 5] == 0.f);
    y.backward(Tensor::ones(y.shape()));
    std::vector<float> g = x.grad().to_vector();
    CHECK(g[0] == 1.f);            // (0, 0, 0, 0): kept
    CHECK(g[1] == 0.f);            // (0, 0, 0, 1): dropped by the subsampling
    CHECK(test::load_fixture("models_keys_resnet32x2").tensors.count("layer2.0.shortcut.0.weight") == 1);
}

TEST_CASE("models: the ResNet init is Kaiming-normal N(0, 2 / fan_in) on convs") {
    Generator gen(5);
    auto model = models::make_model("resnet56", 10, gen);
    for (const auto& [name, p] : model->named_parameters()) {
        if (name != "layer3.8.conv2.weight" && name != "layer1.0.conv1.weight") continue;
        double sum2 = 0;
        for (float v : p.to_vector()) sum2 += double(v) * v;
        const double var = sum2 / p.numel(), expected = 2.0 / (p.numel() / p.size(0));
        CHECK(var == doctest::Approx(expected).epsilon(0.1));
    }
}

TEST_CASE("models: summary (razor info) counts parameters, FLOPs and the tape per module") {
    Generator gen(0);
    auto model = models::make_model("resnet20", 10, gen);
    const Tensor running_before = model->state_dict().at("bn1.running_mean").clone();
    const models::ModelSummary s = models::summarize(*model, {2, 3, 32, 32});
    CHECK(s.params == 269'722);
    CHECK(s.output == Shape{2, 10});
    CHECK(s.macs == 2 * 40'551'040);   // per image: 40.55 M MACs (docs/baselines.md §4: 40.6 M)
    int64_t params = 0, saved = 0;
    std::map<std::string, const models::LayerSummary*> rows;
    for (const auto& row : s.layers) params += row.params, saved += row.saved_bytes, rows[row.path] = &row;
    CHECK(params == s.params);
    CHECK(saved == s.saved_bytes);
    CHECK(rows.at("conv1")->macs == 2 * 16 * 32 * 32 * 3 * 9);
    CHECK(rows.at("conv1")->saved_bytes == 2 * 3 * 32 * 32 * 4);            // its input, dense fp32
    CHECK(rows.at("layer1.0.conv1")->saved_bytes == 2 * 16 * 32 * 32 * 4);
    // the stem's fused BN + ReLU: its input dense fp32, mean and rstd, and the ReLU's 1 bit per element
    CHECK(rows.at("bn1")->saved_bytes == 2 * 16 * 32 * 32 * 4 + 2 * 16 * 4 + 2 * 16 * 32 * 32 / 8);
    CHECK(rows.at("")->saved_bytes == 0);                                    // pool and flatten save nothing
    CHECK(rows.at("layer2.0")->output == Shape{2, 32, 16, 16});
    CHECK(rows.at("layer2.0.shortcut")->type == "PadShortcut");
    CHECK(rows.at("linear")->macs == 2 * 10 * 64);
    // the model is left as it was: no tape, buffers restored
    CHECK(current_tape().live().items == 0);
    CHECK(model->state_dict().at("bn1.running_mean").to_vector() == running_before.to_vector());
    CHECK(model->state_dict().at("bn1.num_batches_tracked").to_vector_i64()[0] == 0);
    const std::string table = models::format_summary(s);
    CHECK(table.find("layer1.0.conv1") != std::string::npos);
    CHECK(table.find("parameters    269,722") != std::string::npos);
    CHECK(table.find("forward MACs  40,551,040 per image") != std::string::npos);

    // FLOPs of the other reference points (docs/baselines.md §4)
    auto vit = models::make_model("vit_tiny", 10, gen);
    CHECK(models::summarize(*vit, {1, 3, 32, 32}).macs == 365'107'584);   // 365.1 M, attention 19.5 M
    auto mlp = models::make_model("mlp", 10, gen);
    CHECK(models::summarize(*mlp, {1, 3, 32, 32}).macs == 3072 * 1024 + 1024 * 1024 + 1024 * 10);
}
