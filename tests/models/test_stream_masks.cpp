// tests/models/test_stream_masks.cpp -- --stream-masks on the CIFAR ResNets (sparse::share_stream_masks): the
// models name the residual stream every writer adds into; with the masks shared, every writer of a stream keeps the
// same channels in every sampled pass, so the stream's active set is one mask and the block's first conv reads
// that set instead of the union of independent masks (a compact pass then costs about keep^2 of dense, not more);
// the estimator and Adam see each stream's Bernoulli variables once; extract() narrows each stage to the mask.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "models/channel_plan.h"
#include "models/registry.h"
#include "nn/channel_subset.h"
#include "train/vrpge_trainer.h"

using namespace razor;

namespace {

std::map<std::string, std::string> stream_of(const std::vector<sparse::ScoredLayer>& layers) {
    std::map<std::string, std::string> out;
    for (const auto& l : layers) out[l.name] = l.stream;
    return out;
}

// MACs of one compact forward with `masks` over dense.
double cost_ratio(nn::Module& model, const std::vector<sparse::ScoredLayer>& layers, const sparse::ChannelMasks& masks,
                  Generator& gen) {
    const models::ChannelPlan plan = models::ChannelPlan::from_masks(layers, masks);
    nn::ChannelSubsetScope compact(plan);
    NoGradGuard no_grad;
    model(Tensor::randn({1, 3, 32, 32}, gen));
    return compact.cost().ratio();
}

}  // namespace

TEST_CASE("stream masks: each CIFAR ResNet names the stream its writers add into (option A and B)") {
    Generator gen(0);
    auto b = models::make_model("resnet32x2", 10, gen);
    auto sb = stream_of(models::channel_prunable(*b).scored_layers());
    CHECK(sb["conv1"] == "layer1");
    CHECK(sb["layer1.4.conv2"] == "layer1");
    CHECK(sb["layer1.4.conv1"].empty());
    CHECK(sb["layer2.0.shortcut.0"] == "layer2");
    CHECK(sb["layer2.0.conv2"] == "layer2");
    CHECK(sb["layer3.2.conv2"] == "layer3");
    CHECK(sb["linear"].empty());
    sparse::ChannelScores tied(sparse::share_stream_masks(models::channel_prunable(*b).scored_layers()));
    // block conv1s 5 x (32 + 64 + 128) = 1,120, plus one mask per stream: 32 + 64 + 128
    CHECK(tied.num_masked_channels() == 1120 + 224);
    CHECK(tied.parameters().size() == 15 + 3);

    auto a = models::make_model("resnet20", 10, gen);   // option A: the zero-pad shortcut starts a new stream
    auto sa = stream_of(models::channel_prunable(*a).scored_layers());
    CHECK(sa["conv1"] == "layer1");
    CHECK(sa["layer1.2.conv2"] == "layer1");
    CHECK(sa["layer2.0.conv2"] == "layer2");
    CHECK(sa["layer3.1.conv2"] == "layer3");
    CHECK(sparse::ChannelScores(sparse::share_stream_masks(models::channel_prunable(*a).scored_layers()))
              .num_masked_channels() == 3 * (16 + 32 + 64) + (16 + 32 + 64));
    auto v = models::make_model("vgg16_bn", 10, gen);
    CHECK_THROWS_AS(sparse::share_stream_masks(models::channel_prunable(*v).scored_layers()), Error);
}

TEST_CASE("stream masks: a stream's writers keep one channel set, the pass costs about keep^2 (reference: more), "
          "extract() narrows each stage to it (resnet32x2)") {
    Generator gen(3);
    auto model = models::make_model("resnet32x2", 10, gen);
    auto& p = models::channel_prunable(*model);
    const auto layers = sparse::share_stream_masks(p.scored_layers());
    sparse::ChannelScores tied(layers, 0.5f), reference(p.scored_layers(), 0.5f);
    Generator masks(11);
    const sparse::ChannelMasks m = tied.sample(masks);
    std::map<std::string, std::vector<int64_t>> by_stream;
    for (size_t l = 0; l < layers.size(); ++l) {
        if (layers[l].stream.empty()) continue;
        INFO(layers[l].name);
        const auto kept = m.kept[l].to_vector_i64();
        const auto [it, first] = by_stream.emplace(layers[l].stream, kept);
        if (!first) CHECK(kept == it->second);
    }
    CHECK(by_stream.size() == 3);
    // keep 0.5: the tied pass is near 0.25 of dense; the reference's stream is the union of 6 independent masks
    // (about 98 % of its channels), so every block conv1 reads a nearly dense input
    const double tied_cost = cost_ratio(*model, layers, m, gen);
    const double reference_cost = cost_ratio(*model, reference.layers(), reference.sample(masks), gen);
    MESSAGE("MACs over dense at keep 0.5: stream masks ", tied_cost, ", reference ", reference_cost);
    CHECK(tied_cost < 0.29);
    CHECK(reference_cost > 0.32);

    model->eval();
    const auto sub = p.extract(models::ChannelPlan::from_masks(layers, m));
    CHECK(sub.widths[0] == static_cast<int64_t>(by_stream["layer1"].size()));   // the stem: the stage-1 stream
}

TEST_CASE("stream masks: a VrpgeTrainer step puts the estimator's gradient on the stream owners only") {
    Generator gen(5);
    auto model = models::make_model("resnet20", 10, gen);
    train::VrpgeTrainerOptions o;
    o.step.rho = 0.5;
    o.stream_masks = true;
    train::VrpgeTrainer trainer(model, o);
    CHECK(trainer.opt_s.params().size() == trainer.scores.parameters().size());
    CHECK(trainer.scores.parameters().size() == 9 + 3);   // 9 block conv1s, 3 streams
    const Tensor x = Tensor::randn({4, 3, 32, 32}, gen);
    const Tensor y = Tensor::from_vector_i64({4}, {1, 2, 3, 4});
    Generator masks(2);
    const auto step = trainer.step(x, y, masks);
    CHECK(std::isfinite(step.loss));
    CHECK(step.cost_ratio < 0.4);
    for (size_t l = 0; l < trainer.scores.layers().size(); ++l)
        CHECK(trainer.scores.s(l).defined() == trainer.scores.owns_mask(l));
    const double keep = trainer.expected_keep();
    CHECK(keep <= 0.5 + 1e-6);   // projected onto the budget over the owners' s
}
