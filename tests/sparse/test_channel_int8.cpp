// tests/sparse/test_channel_int8.cpp -- BatchNorm inputs stored small (RazorConfig::batch_norm): the per-channel int8
// codec's error bound; BN's backward with an int8 or fp16 input copy against the dense-saved backward, within the
// bound derived in sparse/channel_int8.h; the tape counts the stored bytes exactly (hand count).
#include <algorithm>
#include <cmath>
#include <vector>

#include "sparse/back_razor.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::sparse;
using namespace razor::test;

namespace {

// x (N, C, S...) whose channels differ in scale by 1000x and sit at offsets of a few stds: a per-sample code would
// give the narrow channels a handful of levels.
Tensor channels_of_mixed_scale(const Shape& shape, uint64_t seed) {
    Generator gen(seed);
    Tensor x = Tensor::randn(shape, gen);
    const int64_t N = shape[0], C = shape[1], S = x.numel() / (N * C);
    for (int64_t r = 0; r < N * C; ++r) {
        const int64_t c = r % C;
        const float scale = std::pow(10.f, static_cast<float>(c % 4) - 1.f);   // 0.1, 1, 10, 100
        const float offset = 2.f * scale * static_cast<float>(c % 3);
        for (int64_t s = 0; s < S; ++s) x.f32()[r * S + s] = x.f32()[r * S + s] * scale + offset;
    }
    return x;
}

// Per channel min and max over (N, S).
void channel_range(const Tensor& x, std::vector<float>& lo, std::vector<float>& hi) {
    const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
    lo.assign(C, INFINITY), hi.assign(C, -INFINITY);
    for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t c = (i / S) % C;
        lo[c] = std::min(lo[c], x.f32()[i]), hi[c] = std::max(hi[c], x.f32()[i]);
    }
}

}  // namespace

TEST_CASE("channel int8: n + 8 C bytes; |unpack - x| <= step_c / 2 with step_c = (max_c - min_c) / 255 per channel") {
    for (const Shape& shape : {Shape{3, 5, 4, 3}, Shape{7, 6}, Shape{2, 4, 9}}) {
        INFO("x " << shape_str(shape));
        const Tensor x = channels_of_mixed_scale(shape, 11);
        const int64_t N = shape[0], C = shape[1], S = x.numel() / (N * C);
        auto q = ChannelInt8Tensor::pack(x);
        CHECK(q->stored_bytes() == x.numel() + 8 * C);
        CHECK(q->format() == "channel+i8");
        CHECK(q->shape() == shape);
        std::vector<float> lo, hi;
        channel_range(x, lo, hi);
        const Tensor u = q->unpack();
        int64_t bad = 0, wrong_params = 0;
        double worst_rel = 0;   // largest |error| / step_c seen: the bound is nearly reached, not loose
        for (int64_t c = 0; c < C; ++c) {
            const float step = (hi[c] - lo[c]) / 255.f;
            wrong_params += q->qparams()[2 * c] != lo[c] || q->qparams()[2 * c + 1] != step;
        }
        for (int64_t i = 0; i < x.numel(); ++i) {
            const int64_t c = (i / S) % C;
            const float step = (hi[c] - lo[c]) / 255.f;
            const double err = std::fabs(double(u.f32()[i]) - x.f32()[i]);
            // step / 2, plus the fp32 rounding of lo + step * code and of the reciprocal in the encoder
            bad += err > 0.5 * step * (1 + 1e-5) + 1e-6 * std::fabs(x.f32()[i]);
            worst_rel = std::max(worst_rel, err / step);
        }
        CHECK(wrong_params == 0);
        CHECK(bad == 0);
        CHECK(worst_rel > 0.4);
    }
    // A constant channel (step 0) comes back exactly; 1-d input and non-f32 are refused.
    Tensor flat = Tensor::full({2, 3, 4}, 1.25f);
    CHECK(ChannelInt8Tensor::pack(flat)->unpack().to_vector() == flat.to_vector());
    CHECK_THROWS_AS(ChannelInt8Tensor::pack(Tensor::ones({8})), Error);
}

TEST_CASE("int8 codes: quantize_u8 rounds to nearest even and clamps, in its SIMD body and its tail alike") {
    // Every codec's int8 codes come from quantize_u8; its vector body must give the codes of the scalar rule
    // round((v - lo) / step) clamped to [0, 255], computed as (v - lo) * (1 / step) in fp32.
    const float lo = -3.f, step = 0.25f;   // exact in binary: the halves below are exact ties
    std::vector<float> v;
    for (int code = 0; code <= 255; ++code) {
        const float at = lo + step * static_cast<float>(code);
        v.insert(v.end(), {at, at + 0.5f * step, at - 0.5f * step, at + 0.49f * step});
    }
    v.insert(v.end(), {lo - 10.f, lo + 1000.f, -0.f, 0.f});   // clamped low and high
    for (int64_t n : {int64_t(v.size()), int64_t(v.size()) - 5, int64_t{15}, int64_t{1}}) {
        std::vector<uint8_t> codes(static_cast<size_t>(n));
        quantize_u8(v.data(), n, lo, step, codes.data());
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i) {
            const float q = std::nearbyint((v[i] - lo) * (1.f / step));
            wrong += codes[i] != static_cast<uint8_t>(std::clamp(q, 0.f, 255.f));
        }
        CHECK(wrong == 0);
    }
    // Ties go to the even code: 2.5 -> 2, 3.5 -> 4.
    const float ties[2] = {lo + 2.5f * step, lo + 3.5f * step};
    uint8_t out[2];
    quantize_u8(ties, 2, lo, step, out);
    CHECK(out[0] == 2);
    CHECK(out[1] == 4);
}

TEST_CASE("channel int8: every channel keeps its resolution, where the per-sample code of dense_coded.h does not") {
    // The narrowest channel (std 0.1) next to one of std 100: in x_hat units (divided by the channel's std), the
    // per-channel error stays below ~0.02, the per-sample one is of order 1.
    const Tensor x = channels_of_mixed_scale({4, 4, 8, 8}, 12);
    const Tensor per_channel = ChannelInt8Tensor::pack(x)->unpack();
    const Tensor per_sample = DenseCodedTensor::pack(x, ValueCodec::I8)->unpack();
    double worst_channel = 0, worst_sample = 0;   // max |error| * rstd of channel 0 (std 0.1)
    for (int64_t n = 0; n < 4; ++n)
        for (int64_t s = 0; s < 64; ++s) {
            const int64_t i = (n * 4 + 0) * 64 + s;
            worst_channel = std::max(worst_channel, std::fabs(double(per_channel.f32()[i]) - x.f32()[i]) / 0.1);
            worst_sample = std::max(worst_sample, std::fabs(double(per_sample.f32()[i]) - x.f32()[i]) / 0.1);
        }
    MESSAGE("x_hat error of the narrow channel: per channel " << worst_channel << ", per sample " << worst_sample);
    CHECK(worst_channel < 0.03);
    CHECK(worst_sample > 0.3);
}

namespace {

struct BnRun {
    Tensor gx, gw, gb;
    std::string format;            // the stored form of x
    TapeTotals live;               // after the forward
};

BnRun run_bn(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& g, bool relu,
             std::shared_ptr<const SavePolicy> policy) {
    Tensor x = x0.detach().clone().requires_grad_(), w = w0.detach().clone().requires_grad_(),
           b = b0.detach().clone().requires_grad_();
    BnRun r;
    TapeScope scope;
    Tensor y;
    {
        SavePolicyGuard guard(std::move(policy));
        y = relu ? batch_norm_relu(x, w, b, Tensor(), Tensor(), true) : batch_norm(x, w, b, Tensor(), Tensor(), true);
    }
    for (const SavedRecord& rec : scope.tape().records())
        if (rec.name == "x") r.format = rec.format;
    r.live = scope.tape().live();
    y.backward(g);
    CHECK(scope.tape().live().items == 0);
    r.gx = x.grad(), r.gw = w.grad(), r.gb = b.grad();
    return r;
}

}  // namespace

TEST_CASE("channel int8 / fp16 BN inputs: gbeta exact, ggamma and gx within the derived bound of the dense backward") {
    // sparse/channel_int8.h: with x_hat~ = x_hat + d, |d_i| <= delta_i, gm the upstream gradient through the ReLU
    // mask, A = mean_c(gm x_hat), E_c = mean_c(|gm| delta):
    //   |ggamma~ - ggamma|_c <= sum_c |gm| delta
    //   |gx~ - gx|_i         <= |w_c| rstd_c (delta_i |A_c| + (|x_hat_i| + delta_i) E_c)
    // int8: delta_i = step_c / 2 * rstd_c. fp16: delta_i = (|x_i| 2^-11 + 2^-25) rstd_c (relative rounding of
    // normal numbers, absolute below 2^-14). Plus fp32 rounding slack: both backwards sum in float.
    const int64_t N = 6, C = 4, S = 25;
    const Tensor x = channels_of_mixed_scale({N, C, 5, 5}, 21);
    const Tensor w = randn_leaf({C}, 22), b = randn_leaf({C}, 23);
    Generator gen(24);
    const Tensor g = Tensor::randn({N, C, 5, 5}, gen);
    // Batch statistics and x_hat in double, from the true x (what the op saves as mean and rstd).
    std::vector<double> mean(C, 0), rstd(C, 0);
    for (int64_t c = 0; c < C; ++c) {
        double s = 0, s2 = 0;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < S; ++k) s += x.f32()[(n * C + c) * S + k];
        mean[c] = s / (N * S);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < S; ++k) s2 += std::pow(x.f32()[(n * C + c) * S + k] - mean[c], 2);
        rstd[c] = 1 / std::sqrt(s2 / (N * S) + 1e-5);
    }
    std::vector<float> lo, hi;
    channel_range(x, lo, hi);

    for (const bool relu : {false, true}) {
        for (const BatchNormSave mode : {BatchNormSave::ChannelI8, BatchNormSave::DenseF16}) {
            const std::string what = std::string(relu ? "batch_norm_relu" : "batch_norm") + ", bn inputs " +
                                     batch_norm_save_name(mode);
            INFO(what);
            const BnRun dense = run_bn(x, w, b, g, relu, std::make_shared<DenseSavePolicy>());
            RazorConfig config;
            config.batch_norm = mode;
            const BnRun coded = run_bn(x, w, b, g, relu, std::make_shared<RazorSavePolicy>(config));
            CHECK(dense.format == "dense");
            CHECK(coded.format == (mode == BatchNormSave::ChannelI8 ? "channel+i8" : "dense+f16"));
            CHECK(coded.gb.to_vector() == dense.gb.to_vector());   // gbeta needs no x_hat: bit-identical

            // gm: g through the ReLU mask (y > 0 of the exact forward, the same in both runs).
            std::vector<double> gm(x.numel()), xhat(x.numel()), delta(x.numel());
            for (int64_t i = 0; i < x.numel(); ++i) {
                const int64_t c = (i / S) % C;
                xhat[i] = (x.f32()[i] - mean[c]) * rstd[c];
                const double y = w.f32()[c] * xhat[i] + b.f32()[c];
                gm[i] = !relu || y > 0 ? g.f32()[i] : 0.0;
                delta[i] = mode == BatchNormSave::ChannelI8 ? (hi[c] - lo[c]) / 255.0 / 2 * rstd[c] * (1 + 1e-4)
                                                            : (std::fabs(x.f32()[i]) * std::ldexp(1.0, -11) + std::ldexp(1.0, -25)) * rstd[c];
            }
            std::vector<double> A(C, 0), E(C, 0), sum_abs(C, 0), gw_bound(C, 0);
            for (int64_t i = 0; i < x.numel(); ++i) {
                const int64_t c = (i / S) % C;
                A[c] += gm[i] * xhat[i] / (N * S);
                E[c] += std::fabs(gm[i]) * delta[i] / (N * S);
                sum_abs[c] += std::fabs(gm[i]);
                gw_bound[c] += std::fabs(gm[i]) * delta[i];
            }
            int64_t bad_gw = 0, bad_gx = 0, moved = 0;
            double worst = 0;   // largest |gx error| / bound: the bound is derived, not loose by orders
            for (int64_t c = 0; c < C; ++c) {
                const double slack = 1e-5 * (sum_abs[c] + 1);
                bad_gw += std::fabs(double(coded.gw.f32()[c]) - dense.gw.f32()[c]) > gw_bound[c] + slack;
            }
            for (int64_t i = 0; i < x.numel(); ++i) {
                const int64_t c = (i / S) % C;
                const double k = std::fabs(w.f32()[c]) * rstd[c];
                const double bound = k * (delta[i] * std::fabs(A[c]) + (std::fabs(xhat[i]) + delta[i]) * E[c]);
                const double slack = 1e-5 * k * (std::fabs(gm[i]) + sum_abs[c] / (N * S) * (1 + std::fabs(xhat[i])));
                const double err = std::fabs(double(coded.gx.f32()[i]) - dense.gx.f32()[i]);
                bad_gx += err > bound + slack;
                moved += err > slack;
                worst = std::max(worst, err / (bound + slack));
            }
            MESSAGE(what << ": worst gx error / bound " << worst);
            CHECK(bad_gw == 0);
            CHECK(bad_gx == 0);
            CHECK(moved > 0);   // the coded copy was really used
        }
    }
}

TEST_CASE("channel int8 / fp16 BN inputs: the tape holds exactly the hand-counted bytes, and nothing after backward") {
    const Tensor x = channels_of_mixed_scale({2, 4, 8, 8}, 31);   // 512 values, 4 channels
    const Tensor w = Tensor::ones({4}), b = Tensor::zeros({4});
    Generator gen(32);
    const Tensor g = Tensor::randn({2, 4, 8, 8}, gen);
    // Hand count (batch_norm_relu, train mode; weight by reference, 0 bytes):
    //   x     int8: 512 codes + 4 channels x (lo, step) 8 bytes = 544;  fp16: 2 x 512 = 1024;  dense: 4 x 512 = 2048
    //   mean, rstd: 4 floats each                                = 32
    //   mask: 1 bit per value                                    = 64
    // The dense-equivalent is the dense tape's 2048 + 32 + 64 in every mode.
    struct Case {
        BatchNormSave mode;
        int64_t x_bytes;
    };
    for (const Case& k : {Case{BatchNormSave::ChannelI8, 544}, Case{BatchNormSave::DenseF16, 1024},
                          Case{BatchNormSave::Dense, 2048}}) {
        INFO("bn inputs " << std::string(batch_norm_save_name(k.mode)));
        RazorConfig config;
        config.batch_norm = k.mode;
        const BnRun r = run_bn(x, w, b, g, true, std::make_shared<RazorSavePolicy>(config));
        CHECK(r.live.stored_bytes == k.x_bytes + 32 + 64);
        CHECK(r.live.dense_bytes == 2048 + 32 + 64);
        CHECK(r.live.items == 5);   // x, mean, rstd, weight (reference), mask
    }
    CHECK(RazorSavePolicy(RazorConfig{.batch_norm = BatchNormSave::ChannelI8}).name() ==
          "razor r=0.90 values=f32 ln=f32 bn=channel-i8 gelu=dense-f16 ties=razor");
}
