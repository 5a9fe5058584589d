// tests/sparse/test_vrpge_scores.cpp -- VR-PGE structure parameters and the channel sampler (spec §3, §15.3 item 8).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/core.h"
#include "sparse/vrpge_scores.h"

using namespace razor;
using namespace razor::sparse;
using doctest::Contains;

namespace {
void set_values(const Tensor& t, const std::vector<float>& v) {
    REQUIRE(t.numel() == static_cast<int64_t>(v.size()));
    std::copy(v.begin(), v.end(), t.data<float>());
}
}  // namespace

TEST_CASE("vrpge scores: parameters per masked layer, classifier excluded by flag") {
    ChannelScores scores({{"conv1", 4, true}, {"layer1.0.conv1", 6, true}, {"fc", 10, false}}, 0.5f);
    CHECK(scores.num_masked_channels() == 10);
    CHECK(scores.budget(0.3) == doctest::Approx(3.0));
    const auto named = scores.named_parameters();
    REQUIRE(named.size() == 2);
    CHECK(named[0].first == "conv1.s");
    CHECK(named[1].first == "layer1.0.conv1.s");
    CHECK(named[1].second.shape() == Shape{6});
    CHECK(named[1].second.requires_grad());
    CHECK(named[1].second.is_leaf());
    for (float v : named[0].second.to_vector()) CHECK(v == 0.5f);
    CHECK(!scores.s(2).defined());
    CHECK(scores.parameters().size() == 2);

    // A 1000-class head is excluded by the flag, whatever its width (no out-channel heuristic).
    ChannelScores wide({{"features.0", 64, true}, {"classifier", 1000, false}}, 0.25f);
    CHECK(wide.num_masked_channels() == 64);
    CHECK(wide.parameters()[0].to_vector()[3] == 0.25f);
}

TEST_CASE("vrpge scores: bad layer lists and inits throw") {
    CHECK_THROWS_AS(ChannelScores({{"a", 3, true}, {"a", 4, true}}), Error);
    CHECK_THROWS_AS(ChannelScores({{"", 3, true}}), Error);
    CHECK_THROWS_AS(ChannelScores({{"a", 0, true}}), Error);
    CHECK_THROWS_AS(ChannelScores({{"a", 3, true}}, 1.5f), Error);
    CHECK_THROWS_AS(ChannelScores({{"a", 3, true}}, -0.1f), Error);
}

TEST_CASE("vrpge sampler: kept lists are the sorted indices of m; unmasked layers keep everything") {
    ChannelScores scores({{"c1", 7, true}, {"head", 3, false}}, 0.5f);
    set_values(scores.s(0), {0.f, 1.f, 0.5f, 0.5f, 1.f, 0.f, 0.3f});
    Generator gen(11);
    for (int rep = 0; rep < 20; ++rep) {
        const ChannelMasks masks = scores.sample(gen);
        REQUIRE(masks.m.size() == 2);
        REQUIRE(masks.kept.size() == 2);
        const auto m = masks.m[0].to_vector();
        CHECK(m[0] == 0.f);   // s = 0 never keeps
        CHECK(m[5] == 0.f);
        CHECK(m[1] == 1.f);   // s = 1 always keeps
        CHECK(m[4] == 1.f);
        const Tensor& kept = masks.kept[0];
        CHECK(kept.dtype() == DType::I64);
        std::vector<int64_t> expect;
        for (int64_t c = 0; c < 7; ++c)
            if (m[c] == 1.f) expect.push_back(c);
        REQUIRE(kept.numel() == static_cast<int64_t>(expect.size()));
        for (size_t i = 0; i < expect.size(); ++i) CHECK(kept.data<int64_t>()[i] == expect[i]);
        for (float v : masks.m[1].to_vector()) CHECK(v == 1.f);
        REQUIRE(masks.kept[1].numel() == 3);
        for (int64_t c = 0; c < 3; ++c) CHECK(masks.kept[1].data<int64_t>()[c] == c);
        CHECK(!masks.m[0].requires_grad());   // the sampler is outside the graph
    }
}

TEST_CASE("vrpge sampler: empirical keep rate is s within 5 sigma; passes independent; seed reproduces") {
    const std::vector<float> s = {0.f, 0.01f, 0.1f, 0.5f, 0.9f, 0.99f, 1.f};
    ChannelScores scores({{"c", 7, true}}, 0.5f);
    set_values(scores.s(0), s);
    const int N = 100000;
    std::vector<double> ones(7, 0), both(7, 0);
    Generator gen(2024);
    for (int it = 0; it < N; ++it) {
        const ChannelMasks a = scores.sample(gen), b = scores.sample(gen);
        const float *ma = a.m[0].data<float>(), *mb = b.m[0].data<float>();
        for (int c = 0; c < 7; ++c) ones[c] += ma[c], both[c] += ma[c] * mb[c];
    }
    for (int c = 0; c < 7; ++c) {
        const double p = s[c], sigma = std::sqrt(p * (1 - p) / N);
        CHECK(std::fabs(ones[c] / N - p) <= 5 * sigma + 1e-12);
        // Independent passes: P(m¹ = 1, m² = 1) = s².
        const double p2 = p * p, sigma2 = std::sqrt(p2 * (1 - p2) / N);
        CHECK(std::fabs(both[c] / N - p2) <= 5 * sigma2 + 1e-12);
    }
    Generator g1(5), g2(5);
    CHECK(scores.sample(g1).m[0].to_vector() == scores.sample(g2).m[0].to_vector());
}

TEST_CASE("vrpge align_kept: kept counts rounded up to a multiple with the highest-s dropped channels; 0 stays 0") {
    ChannelScores scores({{"a", 6, true}, {"b", 3, true}, {"c", 5, true}, {"head", 4, false}}, 0.5f);
    {
        NoGradGuard no_grad;
        Tensor(scores.s(0)).copy_(Tensor::from_vector({6}, {0.1f, 0.9f, 0.5f, 0.3f, 0.7f, 0.5f}));
    }
    ChannelMasks m;
    m.m = {Tensor::from_vector({6}, {1, 0, 0, 0, 0, 0}), Tensor::from_vector({3}, {0, 1, 0}),
           Tensor::from_vector({5}, {0, 0, 0, 0, 0}), Tensor::ones({4})};
    for (const Tensor& t : m.m) m.kept.push_back(kept_indices(t));
    const ChannelMasks a = align_kept(scores, m, 4);
    // layer a: 1 kept -> 4: add the dropped channels with the highest s: 1 (0.9), 4 (0.7), 2 (0.5, lower index of the tie)
    CHECK(a.kept[0].to_vector_i64() == std::vector<int64_t>{0, 1, 2, 4});
    CHECK(a.m[0].to_vector() == std::vector<float>{1, 1, 1, 0, 1, 0});
    CHECK(a.kept[1].numel() == 3);   // capped at the layer's 3 channels
    CHECK(a.kept[2].numel() == 0);   // 0 is a multiple
    CHECK(a.kept[3].numel() == 4);   // unmasked: untouched
    CHECK(m.kept[0].numel() == 1);   // the caller's masks are not modified
    CHECK(m.m[0].to_vector() == std::vector<float>{1, 0, 0, 0, 0, 0});
    CHECK_THROWS_AS(align_kept(scores, m, 0), Error);
}

TEST_CASE("vrpge shared masks: a sharing layer uses its owner's s and mask, owns no parameter, counts once in n") {
    ScoredLayer a{"a", 4, true}, b{"b", 3, true}, c{"c", 4, true}, head{"head", 2, false};
    c.shares = "a";
    ChannelScores scores({a, b, c, head}, 0.5f);
    CHECK(scores.num_masked_channels() == 7);   // a and b; c's channels are a's Bernoulli variables
    REQUIRE(scores.named_parameters().size() == 2);
    CHECK(scores.named_parameters()[1].first == "b.s");
    CHECK(!scores.s(2).defined());
    CHECK(scores.owner(2) == 0);
    CHECK(scores.owner(1) == 1);
    CHECK(scores.owns_mask(0));
    CHECK(!scores.owns_mask(2));
    CHECK(!scores.owns_mask(3));   // unmasked
    set_values(scores.s(0), {0.f, 1.f, 0.5f, 0.5f});

    // The same generator state gives the same masks with and without the sharing layer: it draws nothing.
    ChannelScores alone({a, b, head}, 0.5f);
    set_values(alone.s(0), {0.f, 1.f, 0.5f, 0.5f});
    Generator g1(5), g2(5);
    for (int rep = 0; rep < 10; ++rep) {
        const ChannelMasks m = scores.sample(g1), ref = alone.sample(g2);
        CHECK(m.kept[2].to_vector_i64() == m.kept[0].to_vector_i64());
        CHECK(m.m[2].to_vector() == m.m[0].to_vector());
        CHECK(m.kept[0].to_vector_i64() == ref.kept[0].to_vector_i64());
        CHECK(m.kept[1].to_vector_i64() == ref.kept[1].to_vector_i64());
        CHECK(m.kept[3].numel() == 2);
    }
    // align_kept gives the sharing layer its owner's aligned mask.
    ChannelMasks m;
    m.m = {Tensor::from_vector({4}, {0, 1, 0, 0}), Tensor::from_vector({3}, {1, 0, 0}),
           Tensor::from_vector({4}, {0, 1, 0, 0}), Tensor::ones({2})};
    for (const Tensor& t : m.m) m.kept.push_back(kept_indices(t));
    const ChannelMasks al = align_kept(scores, m, 2);
    CHECK(al.kept[0].numel() == 2);
    CHECK(al.kept[2].to_vector_i64() == al.kept[0].to_vector_i64());
}

TEST_CASE("vrpge shared masks: bad sharing is refused naming both layers") {
    ScoredLayer a{"a", 4, true}, b{"b", 4, true}, head{"head", 4, false};
    ScoredLayer later = a, wide = b, self = b, of_head = b, chain = b, unmasked = head;
    later.shares = "b";            // b comes later
    CHECK_THROWS_WITH_AS(ChannelScores({later, b}), Contains("'a' shares the mask of 'b'"), Error);
    wide.channels = 5, wide.shares = "a";
    CHECK_THROWS_WITH_AS(ChannelScores({a, wide}), Contains("5 channels"), Error);
    self.shares = "b";
    CHECK_THROWS_AS(ChannelScores({a, self}), Error);
    of_head.shares = "head";
    CHECK_THROWS_AS(ChannelScores({head, of_head}), Error);
    b.shares = "a", chain.name = "c", chain.shares = "b";   // share the owner, not another sharer
    CHECK_THROWS_AS(ChannelScores({a, b, chain}), Error);
    unmasked.name = "u", unmasked.shares = "a";
    CHECK_THROWS_AS(ChannelScores({a, unmasked}), Error);
}

TEST_CASE("vrpge shared masks: share_stream_masks ties each stream's writers to its first; no stream throws") {
    std::vector<ScoredLayer> layers = {{"conv1", 4, true, {}, "layer1"},
                                       {"layer1.0.conv1", 2, true},
                                       {"layer1.0.conv2", 4, true, {}, "layer1"},
                                       {"layer2.0.conv1", 3, true},
                                       {"layer2.0.conv2", 8, true, {}, "layer2"},
                                       {"layer2.0.shortcut.0", 8, true, {}, "layer2"},
                                       {"linear", 10, false}};
    const auto tied = share_stream_masks(layers);
    CHECK(tied[0].shares.empty());
    CHECK(tied[1].shares.empty());
    CHECK(tied[2].shares == "conv1");
    CHECK(tied[4].shares.empty());
    CHECK(tied[5].shares == "layer2.0.conv2");
    CHECK(tied[6].shares.empty());
    CHECK(ChannelScores(tied).num_masked_channels() == 4 + 2 + 3 + 8);
    CHECK_THROWS_WITH_AS(share_stream_masks({{"features.0", 4, true}, {"classifier", 10, false}}),
                         Contains("VGGs have no residual stream"), Error);
}
