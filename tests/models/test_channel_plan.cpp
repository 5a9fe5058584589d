// tests/models/test_channel_plan.cpp -- compact channel execution (models/channel_plan.h) against the dense network
// with zeroed channels: the same weights run dense, every BN output multiplied by its conv's 0/1 mask (true-sparse
// semantics: a dropped channel is exactly 0 downstream, its BN gets nothing). Forward logits, every parameter
// gradient and the kept channels' BN running statistics must agree within 1e-5 (relative to the largest entry);
// dropped channels' statistics must not move. Also: a dense plan is bit-identical to plain dense execution, the
// scored-layer lists (n = 2,464 / 5,504, spec §9.3), extract() + make_model(widths) reproduce the subnetwork, and a
// compact pass keeps the module seam: saved items attributed to module paths as in dense mode, per-module save
// policies and forward observers applied.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "models/channel_plan.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "models/vgg.h"
#include "nn/layers.h"

using namespace razor;
using models::ChannelPlan;

namespace {

// (1, C, 1, 1) 0/1 mask of kept channels.
Tensor mask_of(const std::vector<int64_t>& kept, int64_t C) {
    std::vector<float> m(C, 0.f);
    for (int64_t c : kept) m[c] = 1.f;
    return Tensor::from_vector({1, C, 1, 1}, m);
}

// The dense reference: model's own modules, BN outputs multiplied by the masks of `plan` (looked up by the path of
// the conv before the BN). Run outside any ChannelSubsetScope.
Tensor masked_forward(models::CifarResNet& net, const ChannelPlan& plan, const Tensor& x) {
    auto masked = [&](Tensor t, const std::string& conv) { return mul(t, mask_of(plan.at(conv), t.size(1))); };
    Tensor h = relu(masked((*net.bn1)((*net.conv1)(x)), "conv1"));
    int stage_no = 0;
    for (const auto* stage : {net.layer1.get(), net.layer2.get(), net.layer3.get()}) {
        ++stage_no;
        for (const auto& [name, child] : stage->named_children()) {
            auto& b = static_cast<models::BasicBlock&>(*child);
            const std::string p = fmt("layer", stage_no, ".", name, ".");
            Tensor y = relu(masked((*b.bn1)((*b.conv1)(h)), p + "conv1"));
            y = masked((*b.bn2)((*b.conv2)(y)), p + "conv2");
            Tensor sc = h;
            if (b.shortcut_conv()) sc = masked((*b.shortcut_bn())((*b.shortcut_conv())(h)), p + "shortcut.0");
            else if (b.shortcut) sc = (*b.shortcut)(h);
            h = relu(add(y, sc));
        }
    }
    return (*net.linear)(flatten(adaptive_avg_pool2d(h, {1, 1}), 1));
}

Tensor masked_forward(models::VGG& net, const ChannelPlan& plan, const Tensor& x) {
    Tensor h = x;
    for (const auto& [name, child] : net.features->named_children()) {
        h = (*child)(h);
        if (dynamic_cast<nn::BatchNorm2d*>(child.get()))
            h = mul(h, mask_of(plan.at(fmt("features.", std::stoi(name) - 1)), h.size(1)));
    }
    return (*net.classifier)(flatten(h, 1));
}

// A random plan: every masked layer keeps each channel with probability `keep`; layer `empty` (if >= 0) keeps none.
ChannelPlan random_plan(const std::vector<sparse::ScoredLayer>& layers, double keep, Generator& gen,
                        int64_t empty = -1) {
    ChannelPlan p = ChannelPlan::dense(layers);
    for (size_t l = 0; l < layers.size(); ++l) {
        if (!layers[l].masked) continue;
        std::vector<int64_t> k;
        for (int64_t c = 0; c < layers[l].channels; ++c)
            if (gen.uniform() < keep && static_cast<int64_t>(l) != empty) k.push_back(c);
        p.keep(layers[l].name, k);
    }
    return p;
}

double max_abs(const Tensor& t) {
    double m = 0;
    for (float v : t.to_vector()) m = std::max(m, static_cast<double>(std::fabs(v)));
    return m;
}

// Forward: max |a - b| <= tol * max(1, max |b|). Gradients (what="... grad"): the relative L2 error
// ||a - b|| <= tol * max(||b||, 1e-6) -- a max-entry criterion would mostly measure float32 summation order in the
// few entries behind small-variance BN channels (batch 2-4 at 2x2 spatial in VGG's last stage). An undefined tensor
// counts as zeros of the other's shape. The largest relative L2 error seen is recorded in `worst`.
double worst_grad_error = 0;
void check_close(const Tensor& a, const Tensor& b, const std::string& what, double tol = 1e-5) {
    INFO(what);
    const std::vector<float> va = a.defined() ? a.to_vector() : std::vector<float>(b.numel(), 0.f);
    const std::vector<float> vb = b.defined() ? b.to_vector() : std::vector<float>(va.size(), 0.f);
    REQUIRE(va.size() == vb.size());
    double diff = 0, l2 = 0, l2b = 0;
    for (size_t i = 0; i < va.size(); ++i) {
        const double d = static_cast<double>(va[i]) - vb[i];
        diff = std::max(diff, std::fabs(d));
        l2 += d * d, l2b += static_cast<double>(vb[i]) * vb[i];
    }
    if (what.find(" grad") != std::string::npos) {
        const double rel = std::sqrt(l2) / std::max(std::sqrt(l2b), 1e-6);
        worst_grad_error = std::max(worst_grad_error, rel);
        CHECK(rel <= tol);
    } else {
        CHECK(diff <= tol * std::max(1.0, b.defined() ? max_abs(b) : 0.0));
    }
}

// VGG's gradients pass 16 BatchNorms at batch 4 (16 values per channel at 2x2), each of which scales float32
// rounding by 1/sigma, so the bound here is 3e-5 rather than 1e-5: over seeds 20-27 the worst relative L2 error was
// 0.85-1.17e-5 in both the Release (-O3) and an -O1 build.
// The seed must also keep every pre-ReLU value away from zero. Seed 5 (used before 2026-12-01) put one BN output of
// features.31, channel 317, at 2.7e-6: the compact conv's other summation order flipped that ReLU in the -O1
// (sanitizer) build, moving channel 317's bias gradient by 8 % (1.2e-2 relative L2 over all gradients) while the
// logits agreed within 1e-5. A flipped ReLU is a property of the data, not of compact execution; seed 24's smallest
// pre-ReLU margins are far above float32 rounding.
constexpr double kVggGradTol = 3e-5;

template <class Net>
void check_compact_equals_masked(const std::string& name, const Shape& input, int64_t empty_layer, uint64_t seed,
                                 double grad_tol = 1e-5) {
    INFO(name);
    Generator gen(seed);
    auto a = std::dynamic_pointer_cast<Net>(models::make_model(name, 10, gen));
    auto b = std::dynamic_pointer_cast<Net>(models::make_model(name, 10, gen));
    REQUIRE(a);
    // Non-trivial BN affine parameters and statistics (fresh ones are 1 / 0 / 0 / 1).
    {
        NoGradGuard no_grad;
        for (auto& [key, t] : a->state_dict())
            if (key.find("bn") != std::string::npos || key.find("features") != std::string::npos ||
                key.find("shortcut.1") != std::string::npos) {
                if (t.dtype() != DType::F32 || t.dim() != 1) continue;
                const bool var = key.find("running_var") != std::string::npos;
                Tensor r = Tensor::rand(t.shape(), gen);
                t.copy_(var ? add(r, 0.5f) : sub(mul(r, 0.4f), 0.2f));
                if (key.find(".weight") != std::string::npos) t.copy_(add(r, 0.5f));
            }
    }
    b->load_state_dict(a->state_dict());
    std::map<std::string, std::vector<float>> before;
    for (const auto& [key, t] : a->state_dict())
        if (key.find("running_mean") != std::string::npos) before[key] = t.to_vector();
    const auto layers = a->scored_layers();
    const ChannelPlan plan = random_plan(layers, 0.5, gen, empty_layer);
    const Tensor x = Tensor::randn(input, gen);
    const std::vector<int64_t> labels_v = {3, 7, 1, 0};
    const Tensor labels = Tensor::from_vector_i64({input[0]}, std::vector<int64_t>(labels_v.begin(), labels_v.begin() + input[0]));

    Tensor ya;
    nn::SubsetCost cost;
    {
        nn::ChannelSubsetScope compact(plan);   // a's forward only: b shares the module paths
        ya = (*a)(x);
        cost = compact.cost();
    }
    const Tensor yb = masked_forward(*b, plan, x);
    check_close(ya, yb, "logits");
    cross_entropy(ya, labels).backward();
    cross_entropy(yb, labels).backward();
    const auto pa = a->named_parameters(), pb = b->named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) check_close(pa[i].second.grad(), pb[i].second.grad(), pa[i].first + " grad", grad_tol);

    // Running statistics: kept channels as the reference, dropped channels untouched.
    const auto sa = a->state_dict(), sb = b->state_dict();
    int checked = 0;
    for (const auto& layer : layers) {
        if (!layer.masked) continue;
        // the BN following conv "<p>conv<k>" is "<p>bn<k>"; "conv1" -> "bn1"; "features.i" -> "features.(i+1)";
        // "shortcut.0" -> "shortcut.1"
        std::string bn = layer.name;
        if (bn.rfind("features.", 0) == 0) bn = fmt("features.", std::stoi(bn.substr(9)) + 1);
        else if (bn.size() >= 10 && bn.substr(bn.size() - 10) == "shortcut.0") bn = bn.substr(0, bn.size() - 1) + "1";
        else bn.replace(bn.rfind("conv"), 4, "bn");
        const Tensor ma = sa.at(bn + ".running_mean"), mb = sb.at(bn + ".running_mean");
        const std::vector<float> va = ma.to_vector(), vb = mb.to_vector();
        const auto& kept = plan.at(layer.name);
        for (int64_t c : kept) CHECK(std::fabs(va[c] - vb[c]) <= 1e-5 * std::max(1.0f, std::fabs(vb[c])));
        const std::vector<float>& v0 = before.at(bn + ".running_mean");
        for (int64_t c = 0; c < layer.channels; ++c)
            if (!std::binary_search(kept.begin(), kept.end(), c)) CHECK(va[c] == v0[c]);
        ++checked;
    }
    CHECK(checked > 0);
    // The cost of a half-width plan is well below dense.
    CHECK(cost.ratio() < 0.6);
    CHECK(cost.ratio() > 0.05);
}

}  // namespace

TEST_CASE("channel plan: scored layers -- every conv incl. first and 1x1 shortcuts, classifier unmasked; n as spec") {
    Generator gen(0);
    auto count = [&](const std::string& name, int64_t& n, size_t& layers) {
        auto model = models::make_model(name, 10, gen);
        const auto s = models::channel_prunable(*model).scored_layers();
        n = 0;
        for (const auto& l : s) n += l.masked ? l.channels : 0;
        layers = s.size();
        CHECK(!s.back().masked);
        CHECK(s.back().channels == 10);
        return s;
    };
    int64_t n = 0;
    size_t layers = 0;
    auto r = count("resnet32x2", n, layers);
    CHECK(n == 2464);                    // spec §9.3
    CHECK(layers == 1 + 30 + 2 + 1);     // stem, 15 blocks x 2, 2 projection shortcuts, linear
    CHECK(r[0].name == "conv1");
    CHECK(r[0].inputs.empty());
    auto it = std::find_if(r.begin(), r.end(), [](const auto& l) { return l.name == "layer2.0.shortcut.0"; });
    REQUIRE(it != r.end());
    CHECK(it->channels == 64);
    auto v = count("vgg19_bn", n, layers);
    CHECK(n == 5504);                    // spec §9.3
    CHECK(layers == 17);
    CHECK(v[1].inputs == std::vector<std::string>{"features.0"});
    count("resnet20", n, layers);
    CHECK(n == 16 + 3 * 2 * (16 + 32 + 64));   // option A: no shortcut convs
    auto mlp = models::make_model("mlp", 10, gen);
    CHECK_THROWS_AS(models::channel_prunable(*mlp), Error);
}

TEST_CASE("channel plan: a dense plan is bit-identical to dense execution (resnet20, forward and gradients)") {
    Generator gen(1);
    auto a = models::make_model("resnet20", 10, gen);
    auto b = models::make_model("resnet20", 10, gen);
    b->load_state_dict(a->state_dict());
    auto& p = models::channel_prunable(*a);
    const ChannelPlan plan = ChannelPlan::dense(p.scored_layers());
    const Tensor x = Tensor::randn({2, 3, 32, 32}, gen);
    Tensor ya;
    double ratio = 0;
    {
        nn::ChannelSubsetScope compact(plan);
        ya = (*a)(x);
        ratio = compact.cost().ratio();
    }
    const Tensor yb = (*b)(x);
    CHECK(ya.to_vector() == yb.to_vector());
    sum(ya).backward();
    sum(yb).backward();
    const auto pa = a->named_parameters(), pb = b->named_parameters();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].second.grad().to_vector() == pb[i].second.grad().to_vector());
    CHECK(ratio == 1.0);
}

TEST_CASE("channel plan: compact == dense with zeroed channels, forward and all gradients (resnet20, option A)") {
    check_compact_equals_masked<models::CifarResNet>("resnet20", {2, 3, 32, 32}, -1, 2);
    // an empty conv2 (layer 4 = layer1.1.conv2): that branch is absent, the stream passes through
    check_compact_equals_masked<models::CifarResNet>("resnet20", {2, 3, 32, 32}, 4, 3);
}

TEST_CASE("channel plan: compact == dense with zeroed channels, forward and all gradients (resnet32x2, option B)") {
    check_compact_equals_masked<models::CifarResNet>("resnet32x2", {2, 3, 32, 32}, -1, 4);
    MESSAGE("largest relative L2 gradient error so far: ", worst_grad_error);
}

TEST_CASE("channel plan: compact == dense with zeroed channels, forward and all gradients (vgg19_bn)" *
          doctest::test_suite("model-scale")) {
    check_compact_equals_masked<models::VGG>("vgg19_bn", {4, 3, 32, 32}, -1, 24, kVggGradTol);
    // the last conv keeps nothing: the classifier sees zeros. (An empty conv earlier makes the next layer's maps
    // constant, and max-pool ties then route gradients by float rounding: not a well-posed comparison.)
    check_compact_equals_masked<models::VGG>("vgg19_bn", {4, 3, 32, 32}, 15, 6, kVggGradTol);
    MESSAGE("largest relative L2 gradient error so far: ", worst_grad_error);
}

TEST_CASE("channel plan: extract() is a physically smaller dense model equal to the compact subnetwork (eval)") {
    for (const std::string name : {"resnet20", "resnet32x2", "vgg19_bn"}) {
        INFO(name);
        Generator gen(7);
        auto model = models::make_model(name, 10, gen);
        auto& p = models::channel_prunable(*model);
        const ChannelPlan plan = random_plan(p.scored_layers(), 0.5, gen);
        // one train-mode compact pass so the running statistics are not the fresh ones
        nn::ChannelSubsetScope compact(plan);
        (*model)(Tensor::randn({4, 3, 32, 32}, gen));
        model->eval();
        const auto sub = p.extract(plan);
        CHECK(sub.model->num_parameters() < model->num_parameters());
        // rebuilt from the zoo name and the widths, loaded strictly from the extracted state dict
        auto rebuilt = models::make_model(name, 10, gen, {.widths = sub.widths});
        rebuilt->load_state_dict(sub.model->state_dict());
        rebuilt->eval();
        NoGradGuard no_grad;
        const Tensor x = Tensor::randn({3, 3, 32, 32}, gen);
        const Tensor y_compact = (*model)(x);
        Tensor y_rebuilt;
        {
            const ChannelPlan none{};   // the rebuilt model shares the module paths: run it with no subsets
            nn::ChannelSubsetScope dense(none);
            y_rebuilt = (*rebuilt)(x);
        }
        check_close(y_rebuilt, y_compact, "extracted vs compact", 1e-5);
    }
    Generator gen(0);
    CHECK_THROWS_AS(models::make_model("resnet32x2", 10, gen, {.widths = {1, 2, 3}}), Error);
    CHECK_THROWS_AS(models::make_model("mlp", 10, gen, {.widths = {4}}), Error);
}

namespace {
// Packs every item dense, as the default policy does, and records where each came from: (module path, op).
struct RecordingPolicy final : SavePolicy {
    std::string name() const override { return "recording"; }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override {
        sites.emplace_back(std::string(site.module_path), std::string(site.op));
        return DenseSavePolicy().pack(t, site);
    }
    mutable std::vector<std::pair<std::string, std::string>> sites;
};
}  // namespace

TEST_CASE("channel plan: a compact pass keeps the module seam -- tape attribution by module path as dense, "
          "per-module save policies and forward observers apply (resnet32x2)") {
    Generator gen(9);
    auto model = models::make_model("resnet32x2", 10, gen);
    auto& net = static_cast<models::CifarResNet&>(*model);
    const ChannelPlan plan = random_plan(models::channel_prunable(*model).scored_layers(), 0.5, gen);
    for (const auto& layer : models::channel_prunable(*model).scored_layers())
        REQUIRE(!plan.at(layer.name).empty());   // every layer runs, so every module saves something
    const Tensor x = Tensor::randn({2, 3, 32, 32}, gen);
    const Tensor labels = Tensor::from_vector_i64({2}, {3, 7});

    // One forward (compact or dense) + backward; the live tape's records right after the forward.
    auto pass = [&](bool compact) {
        Tensor loss;
        {
            std::optional<nn::ChannelSubsetScope> scope;
            if (compact) scope.emplace(plan);
            loss = cross_entropy((*model)(x), labels);
        }
        const std::vector<SavedRecord> records = current_tape().records();
        loss.backward();
        model->zero_grad();
        return records;
    };
    auto paths = [](const std::vector<SavedRecord>& records) {
        std::set<std::string> out;
        for (const auto& r : records) out.insert(r.module_path);
        return out;
    };
    const auto dense = pass(false), compact = pass(true);
    CHECK(paths(dense).count("layer1.0.conv1") == 1);
    CHECK(paths(dense).count("layer2.0.shortcut.0") == 1);
    CHECK(paths(compact) == paths(dense));   // the same modules hold the same share of the tape
    // the compact conv saved its compact input: the stem's kept channels, not the full width
    bool found = false;
    for (const auto& r : compact)
        if (r.module_path == "layer1.0.conv1" && r.op == "conv2d" && r.name == "x") {
            found = true;
            CHECK(r.shape == Shape{2, static_cast<int64_t>(plan.at("conv1").size()), 32, 32});
        }
    CHECK(found);

    // A per-module save policy (Module::set_save_policy) applies to what the module saves in compact mode, and only
    // to that.
    auto policy = std::make_shared<RecordingPolicy>();
    auto& block = static_cast<models::BasicBlock&>(*net.layer1->named_children()[0].second);
    block.conv1->set_save_policy(policy);
    {
        std::vector<std::pair<std::string, int64_t>> seen;   // forward observer: (path, output channels)
        nn::ForwardObserverGuard observe([&](const nn::Module&, const std::string& path, const Tensor&, const Tensor& y) {
            seen.emplace_back(path, y.dim() > 1 ? y.size(1) : 0);
        });
        pass(true);
        const auto kept = static_cast<int64_t>(plan.at("layer1.0.conv1").size());
        CHECK(std::find(seen.begin(), seen.end(), std::pair<std::string, int64_t>{"layer1.0.conv1", kept}) != seen.end());
        CHECK(std::find(seen.begin(), seen.end(), std::pair<std::string, int64_t>{"layer1.0.bn1", kept}) != seen.end());
    }
    block.conv1->set_save_policy(nullptr);
    REQUIRE(!policy->sites.empty());
    bool conv_saved = false;
    for (const auto& [path, op] : policy->sites) {
        CHECK(path == "layer1.0.conv1");
        conv_saved |= op == "conv2d";
    }
    CHECK(conv_saved);
}
