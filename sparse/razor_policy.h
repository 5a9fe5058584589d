// sparse/razor_policy.h -- Back Razor as a save policy of razor's tape.
//
// reference: BackRazor_Neurips22 (Linear/Conv/MatMul/LayerNorm "Sparse" modules) and BackRazor_Seg (razored BN
// inputs). docs: docs/back-razor.md.
//
// The forward stays dense and exact; this policy only changes what the tape keeps. Under
//
//     SavePolicyGuard guard(std::make_shared<sparse::RazorSavePolicy>(sparse::RazorConfig{.ratio = 0.9}));
//
// (or model.set_save_policy(...)) every item's stored form is decided by its role (SaveSite::role, core/saved.h) --
// never by op or item name -- and the module path (overrides below):
//
//   role               saved by                    stored as
//   WeightGradOperand  conv2d x, linear x          razored (bitmap + `values`)          gW approximate; gx, gb exact;
//                                                  derive_after_batch_norm: an x that is relu(BN(.)) of a BN input
//                                                  kept as channel int8 is derived from those codes (note_output)
//   InputGradOperand   matmul a, b; softmax y      per `attention`: razored (bitmap + `values`; input gradients
//                                                  approximate), dense int8, or dense
//   BatchNormInput     batch_norm(_relu) x         per `batch_norm`: dense (the default), dense fp16, dense int8
//                                                  with a per-channel code (sparse/channel_int8.h), or razored
//                                                  (bitmap + `norm_values`, the segmentation variant)
//   LayerNormInput     layer_norm x                razored (bitmap + `norm_values`; prune_layer_norm_inputs = false:
//                                                  dense)
//   GeluInput          gelu x                      per `gelu`: dense fp16 (the reference), dense fp32, dense int8,
//                                                  razored, or a 4-bit code of GELU's derivative (sparse/gelu_code.h;
//                                                  a razor extension)
//   PointwiseOperand   mul/div a, b; exp y; ...    dense (exact)
//   LossOperand        cross_entropy probs, ...    dense (exact)
//   Mask, Indices, Statistics (mean/rstd), Parameter: as the dense policy (DenseSaved; parameters by reference).
//
// Per-module overrides (a razor extension; the reference has one global ratio plus a head ratio): `modules` maps a
// module-path prefix to a RazorModuleConfig. The longest prefix that matches whole path components wins ("fc"
// matches "fc" and "fc.0" but not "fc2"; "" matches everything). Overrides may change the ratio, the value codec
// (for every razored item of that module, norm inputs included), or turn pruning off (enabled = false: dense).
// Alternatively give a module its own policy: module.set_save_policy(std::make_shared<RazorSavePolicy>(...)).
//
// Deduplication (spec §5.1): when the same tensor (same storage, offset, shape, strides and version) is saved
// again under the same settings while the first copy (razored, or dense fp16/int8) is alive -- q/k/v Linears reading
// one LayerNorm output, softmax's output also saved by the matmul that consumes it -- the second save shares the
// first's payload. The tape counts it once, and the gradients are bit-identical to separate copies (the masker and
// the codecs are deterministic).
//
// r = 0 with fp32 values keeps every non-zero value exactly: gradients are bit-identical to the dense tape (up to
// the sign of zero: a -0.0 comes back as +0.0).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/tape.h"
#include "sparse/razored_tensor.h"

namespace razor::sparse {

// How the GELU input is kept.
enum class GeluSave : uint8_t {
    DenseF16,   // dense, fp16 values (the reference ViT): 2 bytes/element, exact up to fp16 rounding of x
    Dense,      // dense fp32 reference (as the dense policy)
    DenseI8,    // dense, per-sample int8 (razor extension)
    Razored,    // pruned like the Linear inputs (the reference has this masker but does not use it for the ViT)
    Derivative4,   // 4-bit code of GELU's derivative, 0.5 bytes/element, |error of d| <= 0.0435 (razor extension;
                   // sparse/gelu_code.h)
};
const char* gelu_save_name(GeluSave mode);

// How matmul operands and softmax outputs -- attention's Q, K, V and probabilities P -- are kept. Unlike a Linear's
// input, which only enters its weight gradient, these copies make *input* gradients (dQ = dS K, dK = dS^T Q,
// dV = P^T dO, dP = dO V^T, softmax's gx = P (g - sum g P)), so pruning them perturbs the gradient of every earlier
// layer. Measured (docs/back-razor.md "Transfer", vit_tiny fine-tune at r = 0.9): razored, the training loss ends
// 0.024-0.035 above dense; kept dense or dense int8 it matches dense, at a larger tape (vit_tiny,
// fp32 values: 7.6x -> 6.3x below the dense tape with int8).
enum class AttentionSave : uint8_t {
    Razored,   // pruned like the Linear inputs (the reference ViT; the default)
    DenseI8,   // dense, per-sample int8 (razor extension): a quarter of fp32
    Dense,     // dense fp32
};
const char* attention_save_name(AttentionSave mode);

// How train-mode BatchNorm inputs are kept. BN's backward reads x_hat = (x - mean_c) rstd_c at every element, for
// its *input* gradient as well as gamma's: gx = w rstd (gm - mean(gm) - x_hat mean(gm x_hat)). An error in x_hat
// therefore reaches every earlier layer, and compounds through the blocks. mean_c and rstd_c are always saved
// exact (SaveRole::Statistics), from the true x.
enum class BatchNormSave : uint8_t {
    Dense,       // dense fp32: exact (4 bytes/element)
    DenseF16,    // dense fp16 (sparse/dense_coded.h), 2 bytes/element: |x_hat error| <= |x| rstd_c 2^-11 (the
                 // relative rounding of fp16; grows with |mean_c| / std_c)
    ChannelI8,   // dense int8, one affine code per channel over the batch (sparse/channel_int8.h), 1 byte/element
                 // + 8 per channel: |x_hat error| <= (max_c - min_c) rstd_c / 510, about 0.017 (razor extension)
    // Razored (as BackRazor_Seg) perturbs x_hat at every pruned position: x_hat_s = -mean_c rstd_c there.
    // Measured (docs/back-razor.md "Transfer"): fine-tuning a CIFAR ResNet-20 at r = 0.9 diverged (loss 20 in the
    // first epoch, 43.5 % test accuracy against 91.0 % dense). The reference CNN freezes BN instead (eval mode: BN
    // saves nothing; `--freeze-bn`).
    Razored,
};
const char* batch_norm_save_name(BatchNormSave mode);   // "dense", "dense-f16", "channel-i8", "razored"

struct RazorModuleConfig {
    std::optional<double> ratio = {};     // r for this module's razored items
    std::optional<ValueCodec> values = {}; // value codec for this module's razored items (norm inputs included)
    bool enabled = true;                  // false: everything this module saves stays dense
};

struct RazorConfig {
    double ratio = 0.9;                          // r: the fraction DROPPED per sample (0.9 keeps 10%)
    ValueCodec values = ValueCodec::F32;         // conv/linear/matmul/softmax kept values
    ValueCodec norm_values = ValueCodec::F32;    // batch_norm / layer_norm inputs (the reference keeps LN in fp32)
    TieMode ties = TieMode::Razor;               // Reference only to reproduce the reference's numbers
    GeluSave gelu = GeluSave::DenseF16;
    bool prune_layer_norm_inputs = true;         // razor layer_norm inputs (the reference ViT; false: dense)
    BatchNormSave batch_norm = BatchNormSave::Dense;   // train-mode batch_norm inputs (see BatchNormSave)
    AttentionSave attention = AttentionSave::Razored;   // matmul operands and softmax outputs
    bool dedup = true;                           // share one copy between saves of the same tensor
    // A conv/linear input that is relu(BatchNorm(x)) of a train-mode BN whose x the tape keeps as per-channel int8
    // (batch_norm = ChannelI8): keep it as that function of the BN's codes (ChannelAffineReluTensor,
    // sparse/channel_int8.h: dense, 8 C bytes) instead of a razored copy. A razor extension; false: the reference.
    bool derive_after_batch_norm = false;
    std::map<std::string, RazorModuleConfig> modules = {};   // per module-path-prefix overrides
};

class RazorSavePolicy final : public SavePolicy {
public:
    explicit RazorSavePolicy(RazorConfig config = {});

    // "razor r=0.90 values=f32 ln=f32 bn=dense gelu=dense-f16 ties=razor (+2 module overrides)"; bn= is dense,
    // dense-f16, channel-i8, or the razored inputs' value codec (f32, f16, i8)
    std::string name() const override;
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override;
    // Remembers y = relu(x A + B) of a BN whose x is stored as per-channel int8 (derive_after_batch_norm only).
    void note_output(const Tensor& y, const ChannelAffineRelu& how) const override;

    const RazorConfig& config() const { return config_; }

    // What this policy would do with an item at `site` (exposed for reports and tests).
    enum class Form : uint8_t { Dense, Razored, DenseF16, DenseI8, GeluCode, ChannelI8 };
    struct Decision {
        Form form = Form::Dense;
        bool covered = false;       // a case of decide() handled the role (false only for a role without a case)
        RazorPackOptions options;   // for Razored; options.values also names the DenseI8/DenseF16 codec
    };
    Decision decide(const SaveSite& site) const;

private:
    struct Resolved {
        double ratio;
        std::optional<ValueCodec> values;
        bool enabled;
    };
    Resolved resolve_module(std::string_view module_path) const;
    std::unique_ptr<SavedTensor> pack_razored(const Tensor& t, const RazorPackOptions& options) const;
    std::unique_ptr<SavedTensor> pack_dense_coded(const Tensor& t, ValueCodec codec) const;

    RazorConfig config_;

    // Deduplication cache: payloads that are alive (razored, or dense fp16/int8), keyed by what they were packed
    // from and how.
    struct CacheEntry {
        std::weak_ptr<Storage> source;   // the saved tensor's storage (expired: the key cannot match any more)
        int64_t offset;
        Shape shape, strides;
        uint64_t version;
        Form form;
        double ratio;                    // Razored only
        ValueCodec values;
        TieMode ties;                    // Razored only
        std::weak_ptr<const void> payload;   // the packed copy's payload; expires with the last copy on the tape
    };
    // The live payload packed from exactly t with these settings, or null; and remembering a new one.
    std::shared_ptr<const void> cached(const Tensor& t, Form form, const RazorPackOptions& options) const;
    void remember(const Tensor& t, Form form, const RazorPackOptions& options,
                  const std::shared_ptr<const void>& payload) const;
    mutable std::mutex cache_mutex_;
    mutable std::vector<CacheEntry> cache_;

    // Outputs noted by note_output, until their source storage or the BN's codes are gone (under cache_mutex_).
    struct DerivedEntry {
        std::weak_ptr<Storage> source;   // y's storage
        int64_t offset;
        Shape shape, strides;
        uint64_t version;
        std::weak_ptr<Storage> codes;    // the BN's ChannelInt8Tensor buffer
        std::vector<float> affine;       // ChannelAffineReluTensor::fold
    };
    std::unique_ptr<SavedTensor> derived(const Tensor& t) const;   // null when t was not noted
    mutable std::vector<DerivedEntry> derived_;
};

}  // namespace razor::sparse
