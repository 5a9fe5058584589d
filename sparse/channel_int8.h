// sparse/channel_int8.h -- a BatchNorm input stored dense as int8 with one affine code per CHANNEL (over the batch).
//
// reference: none in Back Razor (the reference keeps BN inputs dense fp32 in the CNN, razored in BackRazor_Seg); a
// razor codec, label results as such. docs: docs/back-razor.md "BatchNorm inputs".
//
// Dimension letters: x (N, C, S) with S = H*W (or L, or 1 for an (N, C) input), as core/ops/batch_norm.cpp;
// M = N*S values per channel.
//
// Why per channel over the batch (not per sample, as sparse/dense_coded.h's int8): BN normalises each channel by
// its own batch statistics, x_hat = (x - mean_c) * rstd_c, and backward reads x_hat. A code step set by channel c's
// own range over the same M values gives every channel the same resolution in x_hat units,
//     |x_hat error| <= step_c / 2 * rstd_c = (max_c - min_c) * rstd_c / 510,
// about 8.9 / 510 = 0.017 for a Gaussian channel at M = 131072 (resnet20, batch 128, 32x32: the expected range of
// 131072 normal draws is 8.9 sigma). A per-sample range is set by the sample's widest channel, so a narrow channel
// next to a wide one keeps a few codes (its x_hat error can approach 1). Per (sample, channel) ranges would be finer
// (4.8 sigma over 64 values at 8x8, 6.5 over 1024 at 32x32) but cost 8 bytes per (n, c) row, 12.5 % on top of the
// codes at 8x8 maps; per channel costs 8 C bytes per tensor (512 bytes at most in resnet20).
//
// Layout (one tracked buffer; stored_bytes() = its size exactly = n + 8 C):
//   qparams (C, 2) float (lo_c, step_c): lo_c = min over the channel, step_c = (max_c - min_c) / 255
//   codes   (n) uint8 in x's (N, C, S) order: code = clamp(round((x - lo_c) / step_c), 0, 255), nearest even
// unpack() widens to dense fp32: x~ = lo_c + step_c * code, |x~ - x| <= step_c / 2 (plus fp32 rounding).
// BatchNorm's backward does not unpack: it reads the codes in place through channel_codes(), with
// x_hat~ = (lo_c - mean_c) rstd_c + step_c rstd_c * code (the same x_hat~ up to fp32 rounding), so backward holds
// no fp32 copy of the input (102 MiB for resnet18's first BatchNorm at batch 32, 224 px).
//
// How the error enters BatchNorm's backward (core/ops/batch_norm.cpp; mean_c and rstd_c are saved exact, from the
// true x, so only x_hat moves): x_hat~ = x_hat + d with |d| <= delta_c = step_c / 2 * rstd_c, and gm the upstream
// gradient (through the fused ReLU's exact mask):
//   gbeta_c  = sum gm                                   -- exact, no x_hat
//   ggamma_c = sum gm x_hat~   error sum gm d           -- |error| <= delta_c * sum |gm|
//   gx = w rstd (gm - mean(gm) - x_hat~ A~),  A = mean(gm x_hat), A~ = A + mean(gm d), |A~ - A| <= delta_c mean|gm|
//        x_hat~ A~ - x_hat A = d A + x_hat (A~ - A) + d (A~ - A), so
//        |gx error| <= |w| rstd_c (delta_c |A| + (|x_hat| + delta_c) delta_c mean|gm|)   elementwise
// i.e. a relative error of order delta_c in the part of gx that removes the x_hat direction; gm - mean(gm) is exact.
// tests/sparse/test_channel_int8.cpp checks these bounds against the dense-saved backward.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/saved.h"

namespace razor::sparse {

class ChannelInt8Tensor final : public SavedTensor {
public:
    // x (N, C, ...) f32 with at least 2 dims (throws otherwise, naming what it got).
    static std::unique_ptr<ChannelInt8Tensor> pack(const Tensor& x);

    Tensor unpack() const override;
    void unpack_into(float* dst) const;
    int64_t stored_bytes() const override { return static_cast<int64_t>(storage_->bytes); }
    std::string format() const override { return "channel+i8"; }
    const Storage* shared_storage() const override { return storage_.get(); }
    std::optional<ChannelCodes> channel_codes() const override { return ChannelCodes{qparams(), codes()}; }

    int64_t channels() const { return C_; }
    int64_t samples() const { return N_; }
    int64_t inner() const { return S_; }   // S: values per (sample, channel)
    const std::shared_ptr<Storage>& storage_handle() const { return storage_; }
    const float* qparams() const { return static_cast<const float*>(storage_->data); }   // (C, 2)
    const uint8_t* codes() const { return static_cast<const uint8_t*>(storage_->data) + 8 * C_; }   // (n)

private:
    ChannelInt8Tensor(Shape shape, int64_t N, int64_t C, int64_t S, std::shared_ptr<Storage> storage)
        : SavedTensor(std::move(shape), DType::F32), N_(N), C_(C), S_(S), storage_(std::move(storage)) {}
    int64_t N_, C_, S_;
    std::shared_ptr<Storage> storage_;
};

// relu(x~ scale_c + shift_c) of a ChannelInt8Tensor's x~, without a copy: a conv's saved input y = relu(BN(x)) kept
// as a function of the BatchNorm's own saved codes (RazorConfig::derive_after_batch_norm, a razor extension). In a
// ResNet block the second conv reads relu(bn1(conv1(.))); its weight gradient needs y at every element, and the tape
// already holds bn1's x as codes. So y costs 8 C bytes (the folded map below) instead of a pruned copy, and is dense:
//     y~ = relu(x~ A_c + B_c) = relu(a_c + b_c code),  a_c = lo_c A_c + B_c,  b_c = step_c A_c
// with A_c = w_c rstd_c, B_c = bias_c - mean_c A_c the forward's own map (core/ops/batch_norm.cpp). relu is
// 1-Lipschitz, so |y~ - y| <= |A_c| step_c / 2 = |w_c| (max_c - min_c) rstd_c / 510 at every element, about 0.017 |w_c|
// for a Gaussian channel (the x_hat bound above, times |w_c|); the conv's weight gradient gW = sum g (x) y~ is off by
// at most that times sum |g| per tap. A pruned copy at r = 0.9 instead sets 90 % of y to 0.
// Layout: the codes are the BatchNorm's (shared_storage(): the tape counts them once); this form owns (C, 2) floats
// (a_c, b_c), its stored_bytes() beside them. unpack_rows expands one sample at a time (conv2d's per-image gW).
class ChannelAffineReluTensor final : public SavedTensor {
public:
    // x: the BatchNorm's stored input; scale, shift (C): the forward's A_c, B_c.
    ChannelAffineReluTensor(const ChannelInt8Tensor& x, const float* scale, const float* shift);
    // The same from x's parts: its buffer and the folded (C, 2) map of fold() (a policy keeps these between the
    // BatchNorm's save and the conv's).
    ChannelAffineReluTensor(Shape shape, std::shared_ptr<Storage> codes, std::vector<float> affine);
    static std::vector<float> fold(const ChannelInt8Tensor& x, const float* scale, const float* shift);

    Tensor unpack() const override;
    int64_t stored_bytes() const override {
        return static_cast<int64_t>(codes_->bytes + affine_.size() * sizeof(float));
    }
    std::string format() const override { return "relu(channel+i8)"; }
    const Storage* shared_storage() const override { return codes_.get(); }
    bool has_row_unpack() const override { return true; }
    void unpack_rows(int64_t first, int64_t count, float* dst) const override;

private:
    int64_t N_, C_, S_;
    std::shared_ptr<Storage> codes_;   // the ChannelInt8Tensor's buffer: (C, 2) qparams, then the (n) codes
    std::vector<float> affine_;        // (C, 2): a_c, b_c
};

}  // namespace razor::sparse
