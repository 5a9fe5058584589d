// tests/sparse/test_derived_after_bn.cpp -- a conv input that is relu(BatchNorm(x)), kept as that function of the
// BN's per-channel int8 codes (RazorConfig::derive_after_batch_norm, ChannelAffineReluTensor in sparse/channel_int8.h):
// the error bound |y~ - y| <= |A_c| step_c / 2, the conv's weight gradient within the bound it implies and every other
// gradient bit-identical to the razored run, the fallbacks (flag off, y written over, BN input not int8), and the
// tape's hand-counted bytes whichever of the two items is released first.
#include <cmath>
#include <vector>

#include "sparse/back_razor.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::sparse;
using namespace razor::test;

namespace {

struct BlockRun {
    Tensor gx, gw_bn, gb_bn, gw_conv;
    std::string conv_x_format;    // the conv's stored input
    TapeTotals live;              // after the forward
};

// z = conv2d(batch_norm_relu(x), W), padding 1: the second half of a ResNet basic block's first conv.
BlockRun run_block(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& W0, const Tensor& g,
                   std::shared_ptr<const SavePolicy> policy) {
    Tensor x = x0.detach().clone().requires_grad_(), w = w0.detach().clone().requires_grad_(),
           b = b0.detach().clone().requires_grad_(), W = W0.detach().clone().requires_grad_();
    BlockRun r;
    TapeScope scope;
    Tensor z;
    {
        SavePolicyGuard guard(std::move(policy));
        Tensor y = batch_norm_relu(x, w, b, Tensor(), Tensor(), true);
        z = conv2d(y, W, Tensor(), Conv2dOptions{.padding = {1, 1}});
    }
    for (const SavedRecord& rec : scope.tape().records())
        if (rec.op == "conv2d" && rec.name == "x") r.conv_x_format = rec.format;
    r.live = scope.tape().live();
    z.backward(g);
    CHECK(scope.tape().live().items == 0);
    r.gx = x.grad(), r.gw_bn = w.grad(), r.gb_bn = b.grad(), r.gw_conv = W.grad();
    return r;
}

RazorConfig derived_config(bool derive) {
    RazorConfig config;
    config.batch_norm = BatchNormSave::ChannelI8;
    config.derive_after_batch_norm = derive;
    return config;
}

}  // namespace

TEST_CASE("derived after BN: relu(x~ A + B) from the codes, within |A_c| step_c / 2 of relu(x A + B); rows as whole") {
    const int64_t N = 3, C = 4, S = 20;
    Generator gen(41);
    const Tensor x = Tensor::randn({N, C, 4, 5}, gen);
    const std::vector<float> A = {0.5f, -2.f, 1.f, 0.f}, B = {0.1f, 0.3f, -0.2f, 0.7f};
    auto codes = ChannelInt8Tensor::pack(x);
    const ChannelAffineReluTensor y(*codes, A.data(), B.data());
    CHECK(y.format() == "relu(channel+i8)");
    CHECK(y.shape() == x.shape());
    CHECK(y.shared_storage() == codes->shared_storage());
    CHECK(y.stored_bytes() == codes->stored_bytes() + 8 * C);   // the tape subtracts the shared codes
    CHECK(y.has_row_unpack());
    const Tensor u = y.unpack(), xq = codes->unpack();
    int64_t bad = 0, off_codes = 0;
    double worst = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t c = (i / S) % C;
        const float step = codes->qparams()[2 * c + 1];
        const double exact = std::max(0.0, double(x.f32()[i]) * A[c] + B[c]);
        const double bound = std::fabs(A[c]) * step / 2 * (1 + 1e-4) + 1e-6;
        const double err = std::fabs(u.f32()[i] - exact);
        bad += err > bound;
        worst = std::max(worst, err / bound);
        // the same function of the decoded x~, up to fp32 rounding of the folded map
        off_codes += std::fabs(u.f32()[i] - std::max(0.f, xq.f32()[i] * A[c] + B[c])) > 1e-5f;
    }
    MESSAGE("worst |y~ - y| / bound " << worst);
    CHECK(bad == 0);
    CHECK(off_codes == 0);
    CHECK(worst > 0.3);   // the bound is nearly reached (channel 3 has A = 0: exact)
    std::vector<float> row(static_cast<size_t>(C * S));
    for (int64_t n = 0; n < N; ++n) {
        y.unpack_rows(n, 1, row.data());
        CHECK(std::equal(row.begin(), row.end(), u.f32() + n * C * S));
    }
    // a map of the wrong size, or codes of another shape, are refused
    CHECK_THROWS_AS(ChannelAffineReluTensor(x.shape(), codes->storage_handle(), std::vector<float>(3)), Error);
    CHECK_THROWS_AS(ChannelAffineReluTensor(Shape{N, C, 3}, codes->storage_handle(), std::vector<float>(2 * C)), Error);
}

TEST_CASE("derived after BN: the conv's gW within the bound; gx, BN's gradients bit-identical to the razored run") {
    const int64_t N = 4, C = 3, OC = 5, H = 6, Wd = 6, S = H * Wd;
    Generator gen(42);
    const Tensor x = Tensor::randn({N, C, H, Wd}, gen);
    const Tensor w = randn_leaf({C}, 43), b = randn_leaf({C}, 44), W = randn_leaf({OC, C, 3, 3}, 45, 0.3f);
    const Tensor g = Tensor::randn({N, OC, H, Wd}, gen);

    const BlockRun dense = run_block(x, w, b, W, g, std::make_shared<DenseSavePolicy>());
    const BlockRun razored = run_block(x, w, b, W, g, std::make_shared<RazorSavePolicy>(derived_config(false)));
    const BlockRun derived = run_block(x, w, b, W, g, std::make_shared<RazorSavePolicy>(derived_config(true)));
    CHECK(razored.conv_x_format.rfind("bitmap", 0) == 0);
    CHECK(derived.conv_x_format == "relu(channel+i8)");
    // The conv's input gradient never reads its x, and BN reads its own codes: everything but gW is identical.
    CHECK(derived.gx.to_vector() == razored.gx.to_vector());
    CHECK(derived.gw_bn.to_vector() == razored.gw_bn.to_vector());
    CHECK(derived.gb_bn.to_vector() == razored.gb_bn.to_vector());

    // gW[oc, c, kh, kw] = sum g[n, oc, p] y[n, c, p + tap]: with |y~ - y| <= e_c = |A_c| step_c / 2 at every
    // element, |gW~ - gW| <= e_c * sum over n, p of |g[n, oc, p]| (a tap off the map reads 0 in both).
    // A_c = w_c rstd_c; step_c = (max_c - min_c) / 255 of channel c's x over the batch.
    std::vector<double> e(C);
    for (int64_t c = 0; c < C; ++c) {
        double s = 0, s2 = 0, lo = INFINITY, hi = -INFINITY;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < S; ++k) {
                const double v = x.f32()[(n * C + c) * S + k];
                s += v, s2 += v * v, lo = std::min(lo, v), hi = std::max(hi, v);
            }
        const double mean = s / (N * S), var = s2 / (N * S) - mean * mean;
        e[c] = std::fabs(w.f32()[c]) / std::sqrt(var + 1e-5) * (hi - lo) / 255 / 2 * (1 + 1e-3);
    }
    std::vector<double> g_abs(OC, 0);
    for (int64_t i = 0; i < g.numel(); ++i) g_abs[(i / S) % OC] += std::fabs(g.f32()[i]);
    int64_t bad = 0, moved = 0;
    double derived_err = 0, razored_err = 0;   // |gW - dense gW| summed: the derived copy is much closer
    for (int64_t i = 0; i < W.numel(); ++i) {
        const int64_t oc = i / (C * 9), c = (i / 9) % C;
        const double err = std::fabs(double(derived.gw_conv.f32()[i]) - dense.gw_conv.f32()[i]);
        const double slack = 1e-5 * (g_abs[oc] + 1);
        bad += err > e[c] * g_abs[oc] + slack;
        moved += err > slack;
        derived_err += err;
        razored_err += std::fabs(double(razored.gw_conv.f32()[i]) - dense.gw_conv.f32()[i]);
    }
    MESSAGE("sum |gW error|: derived " << derived_err << ", razored " << razored_err);
    CHECK(bad == 0);
    CHECK(moved > 0);                         // the codes were really used, not the exact y
    CHECK(derived_err < 0.1 * razored_err);   // and they keep far more of gW than the top 10 %
}

TEST_CASE("derived after BN: the tape counts the codes once plus 8 C bytes, whichever item goes first") {
    const int64_t N = 2, C = 4, H = 8, Wd = 8;
    Generator gen(51);
    const Tensor x = Tensor::randn({N, C, H, Wd}, gen).requires_grad_();
    const Tensor w = Tensor::ones({C}).requires_grad_(), b = Tensor::zeros({C}).requires_grad_();
    const Tensor W = randn_leaf({3, C, 3, 3}, 52);
    // Hand count, train mode (weights and W by reference, 0 bytes):
    //   BN:   x codes 512 + 8 x 4 = 544, mean and rstd 32, mask 512 / 8 = 64
    //   conv: x = relu(x~ A + B) of those codes: its (C, 2) map, 32
    // Dense-equivalent: BN's x 2048 + 32 + 64, the conv's x (y) 2048.
    TapeScope scope;
    Tensor y, z;
    {
        SavePolicyGuard guard(std::make_shared<RazorSavePolicy>(derived_config(true)));
        y = batch_norm_relu(x, w, b, Tensor(), Tensor(), true);
        z = conv2d(y, W, Tensor(), Conv2dOptions{.padding = {1, 1}});
    }
    CHECK(scope.tape().live().stored_bytes == 544 + 32 + 64 + 32);
    CHECK(scope.tape().live().dense_bytes == 2048 + 32 + 64 + 2048);
    // BN's node released first (not backward's order, but a graph may be dropped in pieces): the conv's item now
    // carries the codes it keeps alive.
    std::shared_ptr<Node> conv = z.grad_fn(), bn = y.grad_fn();
    bn->ctx.release();
    CHECK(scope.tape().live().stored_bytes == 544 + 32);
    conv->ctx.release();
    CHECK(scope.tape().live().stored_bytes == 0);
    CHECK(scope.tape().live().items == 0);
}

TEST_CASE("derived after BN: razored when the flag is off, when y was written over, or when BN's input is not int8") {
    const int64_t N = 2, C = 3;
    Generator gen(61);
    const Tensor x = Tensor::randn({N, C, 6, 6}, gen).requires_grad_();
    const Tensor w = Tensor::ones({C}).requires_grad_(), b = Tensor::zeros({C}).requires_grad_();
    const Tensor W = randn_leaf({4, C, 3, 3}, 62);
    const auto conv_format = [&](const RazorConfig& config, bool write_over) {
        TapeScope scope;
        {
            SavePolicyGuard guard(std::make_shared<RazorSavePolicy>(config));
            Tensor y = batch_norm_relu(x, w, b, Tensor(), Tensor(), true);
            if (write_over) y.bump_version();   // as an in-place op on y would
            Tensor z = conv2d(y, W, Tensor(), Conv2dOptions{.padding = {1, 1}});
            for (const SavedRecord& rec : scope.tape().records())
                if (rec.op == "conv2d" && rec.name == "x") return rec.format;
        }
        return std::string("none");
    };
    CHECK(conv_format(derived_config(true), false) == "relu(channel+i8)");
    CHECK(conv_format(derived_config(false), false).rfind("bitmap", 0) == 0);
    CHECK(conv_format(derived_config(true), true).rfind("bitmap", 0) == 0);
    RazorConfig dense_bn = derived_config(true);
    dense_bn.batch_norm = BatchNormSave::Dense;
    CHECK(conv_format(dense_bn, false).rfind("bitmap", 0) == 0);
    CHECK(RazorSavePolicy(derived_config(true)).name() ==
          "razor r=0.90 values=f32 ln=f32 bn=channel-i8 gelu=dense-f16 ties=razor after-bn=derived");
}
