// tests/core/ops/test_batch_norm.cpp -- batch_norm: gradcheck (train/eval, affine on/off, NCHW and NC), PyTorch
// parity (incl. running-stat updates and the cumulative num-batches average), errors, what is saved.
#include <algorithm>
#include <limits>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
// Positive values (for weight, running_var): 0.5 + |N(0, 1)|.
Tensor positive(const Shape& shape, uint64_t seed, bool requires_grad) {
    Tensor t = randn_leaf(shape, seed).detach().clone();
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = 0.5f + std::abs(p[i]);
    if (requires_grad) t.requires_grad_();
    return t;
}
Tensor constant(const Tensor& t) { return t.detach().clone(); }   // a fixture tensor as a plain (no-grad) copy
}  // namespace

TEST_CASE("batch_norm: gradcheck in training mode") {
    SUBCASE("NCHW, affine") {
        Tensor x = randn_leaf({3, 2, 3, 3}, 11, 2.f), w = positive({2}, 12, true), b = randn_leaf({2}, 13);
        gradcheck("batch_norm train nchw",
                  [](const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], {}, {}, true); }, {x, w, b});
    }
    SUBCASE("NCHW, no affine, with running stats (they do not change the output)") {
        Tensor x = randn_leaf({2, 3, 2, 3}, 14), rm = Tensor::zeros({3}), rv = Tensor::ones({3});
        gradcheck("batch_norm train no affine",
                  [=](const std::vector<Tensor>& in) { return batch_norm(in[0], {}, {}, rm, rv, true); }, {x});
    }
    SUBCASE("NC, affine") {
        Tensor x = randn_leaf({5, 4}, 15), w = positive({4}, 16, true), b = randn_leaf({4}, 17);
        gradcheck("batch_norm train nc",
                  [](const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], {}, {}, true); }, {x, w, b});
    }
    SUBCASE("only weight requires grad") {
        Tensor x = randn_leaf({3, 2, 2, 2}, 18).detach().clone(), w = positive({2}, 19, true);
        gradcheck("batch_norm train weight only",
                  [=](const std::vector<Tensor>& in) { return batch_norm(x, in[0], {}, {}, {}, true); }, {w});
    }
}

TEST_CASE("batch_norm: gradcheck in eval mode") {
    Tensor x = randn_leaf({2, 3, 3, 2}, 21), w = positive({3}, 22, true), b = randn_leaf({3}, 23);
    Tensor rm = constant(randn_leaf({3}, 24)), rv = positive({3}, 25, false);
    gradcheck("batch_norm eval",
              [=](const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], rm, rv, false); }, {x, w, b});
}

namespace {
// The fixture cases of `file` through `op` (batch_norm or batch_norm_relu): forward, gradients, running statistics.
using NormOp = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, float, float);
void check_norm_fixture(const std::string& file, NormOp op, const std::vector<std::string>& cases) {
    SafeTensors fx = load_fixture(file);
    auto& t = fx.tensors;
    for (const std::string& c : cases) {
        CAPTURE(c);
        const bool affine = t.count(c + ".weight") > 0, running = t.count(c + ".running_mean") > 0;
        const bool training = c.rfind("train", 0) == 0;
        Tensor x = leaf(t.at(c + ".x"));
        Tensor w = affine ? leaf(t.at(c + ".weight")) : Tensor(), b = affine ? leaf(t.at(c + ".bias")) : Tensor();
        Tensor rm = running ? constant(t.at(c + ".running_mean")) : Tensor();
        Tensor rv = running ? constant(t.at(c + ".running_var")) : Tensor();
        Tensor y = op(x, w, b, rm, rv, training, 0.1f, 1e-5f);
        check_close(y, t.at(c + ".out"), 1e-5, 1e-5, c + " forward");
        y.backward(t.at(c + ".grad_out"));
        // 1e-4: the gradients are sums over N*H*W values; float32 summation order differs from PyTorch's.
        check_close(x.grad(), t.at(c + ".grad_x"), 1e-4, 1e-5, c + " grad x");
        if (affine) {
            check_close(w.grad(), t.at(c + ".grad_weight"), 1e-4, 1e-5, c + " grad weight");
            check_close(b.grad(), t.at(c + ".grad_bias"), 1e-4, 1e-5, c + " grad bias");
        }
        if (running) {
            check_close(rm, t.at(c + ".running_mean_after"), 1e-5, 1e-6, c + " running_mean");
            check_close(rv, t.at(c + ".running_var_after"), 1e-5, 1e-6, c + " running_var (unbiased)");
        }
    }
}
}  // namespace

TEST_CASE("batch_norm: matches PyTorch (forward, backward, running statistics)") {
    check_norm_fixture("batch_norm", batch_norm, {"train_nchw", "train_nc", "train_noaffine", "eval_nchw"});
}

TEST_CASE("batch_norm: momentum = 1/num_batches_tracked gives PyTorch's cumulative average (momentum=None)") {
    SafeTensors fx = load_fixture("batch_norm");
    auto& t = fx.tensors;
    Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});   // BatchNorm2d's initial buffers
    for (int k = 0; k < 3; ++k) {
        const std::string s = std::to_string(k);
        const int64_t num_batches = t.at("cumulative.num_batches_tracked" + s).to_vector_i64()[0];
        CHECK(num_batches == k + 1);
        batch_norm(constant(t.at("cumulative.x" + s)), {}, {}, rm, rv, true, 1.f / static_cast<float>(num_batches));
        check_close(rm, t.at("cumulative.running_mean" + s), 1e-5, 1e-6, "cumulative running_mean after batch " + s);
        check_close(rv, t.at("cumulative.running_var" + s), 1e-5, 1e-6, "cumulative running_var after batch " + s);
    }
}

TEST_CASE("batch_norm: training updates running stats in place and bumps their version, also under no-grad") {
    Tensor x = randn_leaf({4, 2, 3, 3}, 31);
    Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
    const uint64_t vm = rm.version(), vv = rv.version();
    {
        NoGradGuard no_grad;
        Tensor y = batch_norm(x, {}, {}, rm, rv, true);
        CHECK_FALSE(y.requires_grad());
        CHECK(current_tape().live().stored_bytes == 0);
    }
    CHECK(rm.version() > vm);
    CHECK(rv.version() > vv);
    CHECK(rm.to_vector() != std::vector<float>{0.f, 0.f});
    // Eval mode reads the buffers and leaves them alone.
    const std::vector<float> before = rm.to_vector();
    const uint64_t v_eval = rm.version();
    batch_norm(x, {}, {}, rm, rv, false);
    CHECK(rm.to_vector() == before);
    CHECK(rm.version() == v_eval);
}

TEST_CASE("batch_norm: an eval node whose running_var is then updated by a training call refuses backward") {
    Tensor x = randn_leaf({2, 2, 2, 2}, 32);
    Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
    Tensor y = batch_norm(x, {}, {}, rm, rv, false);
    batch_norm(x.detach(), {}, {}, rm, rv, true);   // writes rv in place
    CHECK_THROWS_WITH_AS(y.backward(Tensor::ones(y.shape())), doctest::Contains("batch_norm: a tensor (2) saved"),
                         Error);
}

TEST_CASE("batch_norm: what is saved") {
    auto live = [] { return current_tape().live().stored_bytes; };
    Tensor x = randn_leaf({4, 3, 4, 4}, 41);   // 192 floats = 768 bytes
    Tensor w = positive({3}, 42, false), b = randn_leaf({3}, 43).detach().clone();
    Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
    SUBCASE("eval mode, frozen affine: nothing") {
        Tensor y = batch_norm(x, w, b, rm, rv, false);
        CHECK(y.requires_grad());
        CHECK(live() == 0);
        y.backward(Tensor::ones(y.shape()));
        CHECK(x.grad().defined());
    }
    SUBCASE("eval mode, trainable weight: x only (running stats by reference)") {
        w.requires_grad_();
        Tensor y = batch_norm(x, w, b, rm, rv, false);
        CHECK(live() == 768);
        y.backward(Tensor::ones(y.shape()));
        CHECK(live() == 0);
    }
    SUBCASE("eval mode, only bias trains: nothing") {
        Tensor xc = x.detach().clone();
        b.requires_grad_();
        Tensor y = batch_norm(xc, w, b, rm, rv, false);
        CHECK(live() == 0);
        y.backward(Tensor::ones(y.shape()));
        CHECK(b.grad().to_vector() == std::vector<float>{64.f, 64.f, 64.f});
    }
    SUBCASE("training: x plus mean and rstd per channel (weight by reference)") {
        w.requires_grad_();
        Tensor y = batch_norm(x, w, b, rm, rv, true);
        CHECK(live() == 768 + 2 * 3 * 4);
        const TapeTotals totals = current_tape().live();
        CHECK(totals.items == 4);
        y.backward(Tensor::ones(y.shape()));
        CHECK(live() == 0);
    }
}

TEST_CASE("batch_norm: errors name the op, the expected and actual shapes, and a hint") {
    Tensor x = Tensor::zeros({2, 3, 4, 4});
    CHECK_THROWS_WITH_AS(batch_norm(x, Tensor::ones({4}), {}, {}, {}, true),
                         doctest::Contains("batch_norm: expected weight (3) for x (2, 3, 4, 4), got (4); hint"), Error);
    CHECK_THROWS_WITH_AS(batch_norm(x, {}, {}, Tensor::zeros({3}), Tensor::ones({5}), true),
                         doctest::Contains("expected running_var (3) for x (2, 3, 4, 4), got (5)"), Error);
    CHECK_THROWS_WITH_AS(batch_norm(Tensor::zeros({6}), {}, {}, {}, {}, true),
                         doctest::Contains("batch_norm: expected x (N, C), (N, C, L) or (N, C, H, W), got (6)"), Error);
    CHECK_THROWS_WITH_AS(batch_norm(Tensor::zeros({1, 3, 2, 2, 2}), {}, {}, {}, {}, true),
                         doctest::Contains("got (1, 3, 2, 2, 2)"), Error);
    CHECK_THROWS_WITH_AS(batch_norm(Tensor::zeros({1, 3}), {}, {}, {}, {}, true),
                         doctest::Contains("expected more than 1 value per channel when training"), Error);
    CHECK_THROWS_WITH_AS(batch_norm(x, {}, {}, {}, {}, false), doctest::Contains("eval mode (training=false) needs"),
                         Error);
    CHECK_THROWS_WITH_AS(batch_norm(x, {}, {}, Tensor::zeros({3}), {}, true),
                         doctest::Contains("running_mean and running_var must be given together"), Error);
    CHECK_THROWS_WITH_AS(batch_norm(Tensor::zeros({2, 3}, DType::I64), {}, {}, {}, {}, true),
                         doctest::Contains("batch_norm: expected x f32, got"), Error);
}

TEST_CASE("batch_norm: large input (parallel path) matches the small-path formula on a constant-offset batch") {
    // 8*16*16*16 = 32768 values: runs OpenMP over channels. Each channel k holds values k*100 + {-1, +1}:
    // mean k*100, biased var 1 (the shifted one-pass sums keep this exact despite the large offset).
    const int64_t N = 8, C = 16, S = 256;
    std::vector<float> v(N * C * S);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t s = 0; s < S; ++s) v[(n * C + c) * S + s] = 100.f * c + ((n + s) % 2 ? 1.f : -1.f);
    Tensor x = Tensor::from_vector({N, C, 16, 16}, v);
    Tensor y = batch_norm(x, {}, {}, {}, {}, true, 0.1f, 0.f);
    const std::vector<float> out = y.to_vector();
    for (int64_t i = 0; i < N * C * S; ++i) REQUIRE(std::abs(out[i] - (v[i] - 100.f * ((i / S) % C))) < 1e-4f);
}

// ---------------------------------------------------------------- batch_norm_relu (the fused pair)

namespace {
// A per-channel bias that puts every relu(batch_norm(x, weight, bias)) input at least a few hundredths away from
// ReLU's kink at 0 (finite differences must not step across it): the midpoint of the widest gap between the
// channel's sorted normalised values, taken in the middle half so about half the outputs are clipped.
Tensor bias_away_from_kink(const Tensor& x, const Tensor& weight, bool training, const Tensor& rm, const Tensor& rv) {
    NoGradGuard no_grad;
    const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
    Tensor rm_copy = rm.defined() ? rm.clone() : Tensor(), rv_copy = rv.defined() ? rv.clone() : Tensor();
    const std::vector<float> y0 = batch_norm(x.detach(), weight.detach(), {}, rm_copy, rv_copy, training).to_vector();
    std::vector<float> b(C);
    for (int64_t c = 0; c < C; ++c) {
        std::vector<float> v;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t s = 0; s < S; ++s) v.push_back(y0[(n * C + c) * S + s]);
        std::sort(v.begin(), v.end());
        size_t best = v.size() / 4;
        for (size_t i = v.size() / 4; i + 1 < 3 * v.size() / 4; ++i)
            if (v[i + 1] - v[i] > v[best + 1] - v[best]) best = i;
        b[c] = -(v[best] + v[best + 1]) / 2;
    }
    return Tensor::from_vector({C}, b).requires_grad_();
}
float min_abs(const Tensor& t) {
    float m = std::numeric_limits<float>::infinity();
    for (float v : t.to_vector()) m = std::min(m, std::abs(v));
    return m;
}
}  // namespace

TEST_CASE("batch_norm_relu: gradcheck in training and eval mode") {
    SUBCASE("training, NCHW, affine") {
        Tensor x = randn_leaf({3, 2, 3, 3}, 51, 2.f), w = positive({2}, 52, true);
        Tensor b = bias_away_from_kink(x, w, true, {}, {});
        REQUIRE(min_abs(batch_norm(x, w, b, {}, {}, true)) > 0.03f);
        gradcheck("batch_norm_relu train",
                  [](const std::vector<Tensor>& in) { return batch_norm_relu(in[0], in[1], in[2], {}, {}, true); },
                  {x, w, b});
    }
    SUBCASE("eval, NCHW, affine") {
        Tensor x = randn_leaf({2, 3, 3, 2}, 53), w = positive({3}, 54, true);
        Tensor rm = constant(randn_leaf({3}, 55)), rv = positive({3}, 56, false);
        Tensor b = bias_away_from_kink(x, w, false, rm, rv);
        REQUIRE(min_abs(batch_norm(x, w, b, rm, rv, false)) > 0.03f);
        gradcheck("batch_norm_relu eval",
                  [=](const std::vector<Tensor>& in) { return batch_norm_relu(in[0], in[1], in[2], rm, rv, false); },
                  {x, w, b});
    }
}

TEST_CASE("batch_norm_relu: matches PyTorch relu(batch_norm(x)) (forward, backward, running statistics)") {
    check_norm_fixture("batch_norm_relu", batch_norm_relu, {"train_nchw", "train_noaffine", "eval_nchw"});
}

TEST_CASE("batch_norm_relu: equals relu(batch_norm(x)) bit for bit, saves the same bytes, parallel path included") {
    // (16, 6, 16, 16) = 24576 values: above the OpenMP threshold, several image chunks per channel.
    for (bool training : {true, false}) {
        CAPTURE(training);
        Tensor x1 = randn_leaf({16, 6, 16, 16}, 61, 2.f), x2 = leaf(x1.detach());
        Tensor w1 = positive({6}, 62, true), w2 = leaf(w1.detach()), b1 = randn_leaf({6}, 63), b2 = leaf(b1.detach());
        Tensor rm1 = constant(randn_leaf({6}, 64)), rv1 = positive({6}, 65, false), rm2 = rm1.clone(), rv2 = rv1.clone();
        const Tensor g = randn_leaf({16, 6, 16, 16}, 66).detach();

        const int64_t before = current_tape().live().stored_bytes;
        Tensor pair = relu(batch_norm(x1, w1, b1, rm1, rv1, training));
        const int64_t pair_bytes = current_tape().live().stored_bytes - before;
        pair.backward(g);
        Tensor fused = batch_norm_relu(x2, w2, b2, rm2, rv2, training);
        const int64_t fused_bytes = current_tape().live().stored_bytes - before;
        fused.backward(g);

        CHECK(fused_bytes == pair_bytes);
        CHECK(fused_bytes == (training ? 16 * 6 * 256 * 4 + 2 * 6 * 4 : 16 * 6 * 256 * 4) + 16 * 6 * 256 / 8);
        CHECK(fused.to_vector() == pair.to_vector());
        CHECK(x2.grad().to_vector() == x1.grad().to_vector());
        CHECK(w2.grad().to_vector() == w1.grad().to_vector());
        CHECK(b2.grad().to_vector() == b1.grad().to_vector());
        CHECK(rm2.to_vector() == rm1.to_vector());
        CHECK(rv2.to_vector() == rv1.to_vector());
    }
}

TEST_CASE("batch_norm: a channel's results depend neither on the other channels in the call nor on the threads") {
    // VR-PGE's compact BN runs on the kept channels only. With H*W a multiple of 64 (the backward's 64-value mask
    // words then start at row starts) it equals the full BN on those channels bit for bit; otherwise the backward's
    // float partial sums are split at other points and agree to rounding.
    Tensor x = randn_leaf({80, 5, 8, 8}, 71, 3.f), w = positive({5}, 72, true), b = randn_leaf({5}, 73);
    const Tensor g = randn_leaf({80, 5, 8, 8}, 74).detach();   // 2 image chunks per channel
    const Tensor kept = Tensor::from_vector_i64({2}, {1, 3});
    auto run = [&](bool subset) {
        Tensor xs = leaf((subset ? index_select(x, 1, kept) : x).detach());
        Tensor ws = leaf((subset ? index_select(w, 0, kept) : w).detach());
        Tensor bs = leaf((subset ? index_select(b, 0, kept) : b).detach());
        Tensor y = batch_norm_relu(xs, ws, bs, {}, {}, true);
        y.backward(subset ? index_select(g, 1, kept) : g);
        NoGradGuard no_grad;
        if (!subset) return std::vector<Tensor>{index_select(y, 1, kept), index_select(xs.grad(), 1, kept),
                                                index_select(ws.grad(), 0, kept)};
        return std::vector<Tensor>{y, xs.grad(), ws.grad()};
    };
    const std::vector<Tensor> full = run(false), part = run(true);
    for (size_t i = 0; i < full.size(); ++i) CHECK(full[i].to_vector() == part[i].to_vector());
    const int threads = num_threads();
    set_num_threads(1);
    const std::vector<Tensor> one = run(false);
    set_num_threads(threads);
    for (size_t i = 0; i < full.size(); ++i) CHECK(full[i].to_vector() == one[i].to_vector());
}

TEST_CASE("batch_norm_relu: what is saved (the pair's items: BN's, plus ReLU's 1-bit mask)") {
    auto live = [] { return current_tape().live().stored_bytes; };
    Tensor x = randn_leaf({4, 3, 4, 4}, 81);   // 192 floats = 768 bytes, mask 24 bytes (3 words of 64 bits)
    Tensor w = positive({3}, 82, false), b = randn_leaf({3}, 83).detach().clone();
    Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
    SUBCASE("eval mode, frozen affine: the mask only") {
        Tensor y = batch_norm_relu(x, w, b, rm, rv, false);
        CHECK(live() == 24);
        y.backward(Tensor::ones(y.shape()));
        CHECK(live() == 0);
    }
    SUBCASE("training: x, mean and rstd, mask") {
        Tensor y = batch_norm_relu(x, w, b, rm, rv, true);
        CHECK(live() == 768 + 2 * 3 * 4 + 24);
        CHECK(current_tape().live().items == 5);   // x, mean, rstd, weight (reference), mask
        y.backward(Tensor::ones(y.shape()));
        CHECK(live() == 0);
    }
    SUBCASE("no grad: nothing recorded") {
        NoGradGuard no_grad;
        Tensor y = batch_norm_relu(x, w, b, rm, rv, true);
        CHECK_FALSE(y.requires_grad());
        CHECK(live() == 0);
    }
}

TEST_CASE("batch_norm(Tensor&&): a frozen BN in eval mode writes y over the x the caller gave up; same values and "
          "gradients; never over a shared x, in training, or when the weight trains") {
    const Tensor w = positive({3}, 41, false), b = constant(randn_leaf({3}, 42)), rm = constant(randn_leaf({3}, 43)),
                 rv = positive({3}, 44, false);
    for (const bool relu : {false, true}) {
        INFO("relu ", relu);
        auto plain = [&](const Tensor& x) { return relu ? batch_norm_relu(x, w, b, rm, rv, false)
                                                        : batch_norm(x, w, b, rm, rv, false); };
        auto consuming = [&](Tensor&& x) { return relu ? batch_norm_relu(std::move(x), w, b, rm, rv, false)
                                                       : batch_norm(std::move(x), w, b, rm, rv, false); };
        // x = a * 2 (a leaf requiring grad): a fresh tensor with history, the situation of bn(conv(x)).
        Tensor a = randn_leaf({2, 3, 4, 4}, 45);
        const Tensor expected = plain(mul(a, 2.f));
        Tensor x = mul(a, 2.f);
        const void* storage = x.storage().get();
        const Tensor y = consuming(std::move(x));
        CHECK(y.storage().get() == storage);                   // written in place
        CHECK(y.to_vector() == expected.to_vector());
        sum(mul(y, y)).backward();
        const std::vector<float> grad_in_place = a.grad().to_vector();
        a.zero_grad();
        sum(mul(expected, expected)).backward();
        CHECK(grad_in_place == a.grad().to_vector());

        // Shared: another handle on x's storage (a view) keeps its values; the result is a new buffer.
        Tensor shared = mul(a, 2.f);
        const Tensor view = reshape(shared, {2, 48});
        const std::vector<float> before = view.to_vector();
        const Tensor y2 = consuming(std::move(shared));
        CHECK(view.to_vector() == before);
        CHECK_FALSE(y2.same_storage(view));
        // Training mode and a trained weight save x: never overwritten.
        Tensor t = mul(a, 2.f);
        const void* t_storage = t.storage().get();
        const Tensor y3 = relu ? batch_norm_relu(std::move(t), w, b, rm.clone(), rv.clone(), true)
                               : batch_norm(std::move(t), w, b, rm.clone(), rv.clone(), true);
        CHECK(y3.storage().get() != t_storage);
        Tensor u = mul(a, 2.f);
        const void* u_storage = u.storage().get();
        const Tensor trained_w = positive({3}, 46, true);
        const Tensor y4 = relu ? batch_norm_relu(std::move(u), trained_w, b, rm, rv, false)
                               : batch_norm(std::move(u), trained_w, b, rm, rv, false);
        CHECK(y4.storage().get() != u_storage);
        // ... unless nothing is recorded (evaluation under NoGradGuard): then it is overwritten too.
        NoGradGuard no_grad;
        Tensor e = mul(a, 2.f);
        const void* e_storage = e.storage().get();
        const Tensor y5 = relu ? batch_norm_relu(std::move(e), trained_w, b, rm, rv, false)
                               : batch_norm(std::move(e), trained_w, b, rm, rv, false);
        CHECK(y5.storage().get() == e_storage);
        const Tensor expected5 = relu ? batch_norm_relu(mul(a, 2.f), trained_w, b, rm, rv, false)
                                      : batch_norm(mul(a, 2.f), trained_w, b, rm, rv, false);
        CHECK(y5.to_vector() == expected5.to_vector());
    }
}
