// sparse/razor_policy.cpp -- which saved items Back Razor prunes, and how (see razor_policy.h for the table).
#include "sparse/razor_policy.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "sparse/channel_int8.h"
#include "sparse/dense_coded.h"
#include "sparse/gelu_code.h"

namespace razor::sparse {

namespace {

void check_ratio(double r, const std::string& where) {
    if (!(r >= 0.0 && r <= 1.0))
        throw Error(fmt("RazorSavePolicy: expected ", where, " ratio r in [0, 1] (the fraction dropped), got ", r,
                        "; hint: r = 0.9 keeps 10% of each sample, r = 0 keeps everything"));
}

// True when `prefix` names `path` or one of its ancestors, on whole dot-separated components.
bool path_has_prefix(std::string_view path, std::string_view prefix) {
    if (prefix.empty()) return true;
    if (path.size() < prefix.size() || path.substr(0, prefix.size()) != prefix) return false;
    return path.size() == prefix.size() || path[prefix.size()] == '.';
}

}  // namespace

const char* attention_save_name(AttentionSave mode) {
    switch (mode) {
        case AttentionSave::Razored: return "razored";
        case AttentionSave::DenseI8: return "dense-i8";
        case AttentionSave::Dense: return "dense";
    }
    return "?";
}

const char* batch_norm_save_name(BatchNormSave mode) {
    switch (mode) {
        case BatchNormSave::Dense: return "dense";
        case BatchNormSave::DenseF16: return "dense-f16";
        case BatchNormSave::ChannelI8: return "channel-i8";
        case BatchNormSave::Razored: return "razored";
    }
    return "?";
}

const char* gelu_save_name(GeluSave mode) {
    switch (mode) {
        case GeluSave::DenseF16: return "dense-f16";
        case GeluSave::Dense: return "dense";
        case GeluSave::DenseI8: return "dense-i8";
        case GeluSave::Razored: return "razored";
        case GeluSave::Derivative4: return "d4";
    }
    return "?";
}

RazorSavePolicy::RazorSavePolicy(RazorConfig config) : config_(std::move(config)) {
    check_ratio(config_.ratio, "the global");
    for (const auto& [prefix, m] : config_.modules)
        if (m.ratio) check_ratio(*m.ratio, "module '" + prefix + "'");
}

std::string RazorSavePolicy::name() const {
    char buf[160];
    const char* norm = value_codec_name(config_.norm_values);
    std::snprintf(buf, sizeof buf, "razor r=%.2f values=%s ln=%s bn=%s gelu=%s ties=%s", config_.ratio,
                  value_codec_name(config_.values), config_.prune_layer_norm_inputs ? norm : "dense",
                  config_.batch_norm == BatchNormSave::Razored ? norm : batch_norm_save_name(config_.batch_norm),
                  gelu_save_name(config_.gelu),
                  tie_mode_name(config_.ties));
    std::string out = buf;
    if (config_.attention != AttentionSave::Razored) out += fmt(" attn=", attention_save_name(config_.attention));
    if (config_.derive_after_batch_norm) out += " after-bn=derived";
    if (!config_.modules.empty()) out += fmt(" (+", config_.modules.size(), " module overrides)");
    return out;
}

RazorSavePolicy::Resolved RazorSavePolicy::resolve_module(std::string_view module_path) const {
    Resolved r{config_.ratio, std::nullopt, true};
    size_t best = 0;
    bool found = false;
    for (const auto& [prefix, m] : config_.modules) {
        if (!path_has_prefix(module_path, prefix)) continue;
        if (found && prefix.size() < best) continue;
        found = true, best = prefix.size();
        r = Resolved{m.ratio.value_or(config_.ratio), m.values, m.enabled};
    }
    return r;
}

RazorSavePolicy::Decision RazorSavePolicy::decide(const SaveSite& site) const {
    Decision d;
    // The role alone picks the rule; every role has its case (no default), so a new role is a compile warning here
    // and, if ignored, an uncovered decision (covered = false) that tests/sparse/test_save_roles.cpp reports.
    enum class Rule { Uncovered, Operand, LayerNorm, BatchNorm, Attention, Gelu } rule = Rule::Uncovered;
    switch (site.role) {
        case SaveRole::WeightGradOperand: rule = Rule::Operand; break;
        case SaveRole::InputGradOperand: rule = Rule::Attention; break;
        case SaveRole::LayerNormInput: rule = Rule::LayerNorm; break;
        case SaveRole::BatchNormInput: rule = Rule::BatchNorm; break;
        case SaveRole::GeluInput: rule = Rule::Gelu; break;
        // Elementwise factors of input gradients and a loss head's probabilities: exact (an error would multiply
        // every gradient before them; they are small next to the conv/linear inputs).
        case SaveRole::PointwiseOperand:
        case SaveRole::LossOperand:
        // Not activations: exact, as the dense policy.
        case SaveRole::Mask:
        case SaveRole::Indices:
        case SaveRole::Statistics:
        case SaveRole::Parameter: d.covered = true; return d;
    }
    if (rule == Rule::Uncovered) return d;
    d.covered = true;

    const Resolved m = resolve_module(site.module_path);
    if (!m.enabled) return d;
    d.options.ratio = m.ratio;
    d.options.ties = config_.ties;
    d.options.values = m.values.value_or(config_.values);
    switch (rule) {
        case Rule::Operand: d.form = Form::Razored; break;
        case Rule::LayerNorm:
            if (!config_.prune_layer_norm_inputs) return d;
            d.form = Form::Razored;
            d.options.values = m.values.value_or(config_.norm_values);
            break;
        case Rule::BatchNorm:
            switch (config_.batch_norm) {
                case BatchNormSave::Dense: return d;
                case BatchNormSave::DenseF16: d.form = Form::DenseF16, d.options.values = ValueCodec::F16; break;
                case BatchNormSave::ChannelI8: d.form = Form::ChannelI8, d.options.values = ValueCodec::I8; break;
                case BatchNormSave::Razored:
                    d.form = Form::Razored;
                    d.options.values = m.values.value_or(config_.norm_values);
                    break;
            }
            break;
        case Rule::Attention:
            switch (config_.attention) {
                case AttentionSave::Dense: return d;
                case AttentionSave::DenseI8: d.form = Form::DenseI8, d.options.values = ValueCodec::I8; break;
                case AttentionSave::Razored: d.form = Form::Razored; break;
            }
            break;
        case Rule::Gelu:
            switch (config_.gelu) {
                case GeluSave::Dense: return d;
                case GeluSave::DenseF16: d.form = Form::DenseF16, d.options.values = ValueCodec::F16; break;
                case GeluSave::DenseI8: d.form = Form::DenseI8, d.options.values = ValueCodec::I8; break;
                case GeluSave::Razored: d.form = Form::Razored; break;
                case GeluSave::Derivative4: d.form = Form::GeluCode; break;
            }
            break;
        case Rule::Uncovered: break;
    }
    return d;
}

std::shared_ptr<const void> RazorSavePolicy::cached(const Tensor& t, Form form,
                                                    const RazorPackOptions& options) const {
    const bool razored = form == Form::Razored;
    auto matches = [&](const CacheEntry& e) {
        return e.offset == t.offset() && e.version == t.version() && e.shape == t.shape() &&
               e.strides == t.strides() && e.form == form && e.values == options.values &&
               (!razored || (e.ratio == options.ratio && e.ties == options.ties)) && e.source.lock() == t.storage();
    };
    std::lock_guard lock(cache_mutex_);
    // Forget entries whose payload or source is gone (released nodes, freed activations).
    std::erase_if(cache_, [](const CacheEntry& e) { return e.payload.expired() || e.source.expired(); });
    for (const CacheEntry& e : cache_)
        if (matches(e))
            if (auto handle = e.payload.lock()) return handle;
    return nullptr;
}

void RazorSavePolicy::remember(const Tensor& t, Form form, const RazorPackOptions& options,
                               const std::shared_ptr<const void>& payload) const {
    std::lock_guard lock(cache_mutex_);
    cache_.push_back(CacheEntry{t.storage(), t.offset(), t.shape(), t.strides(), t.version(), form, options.ratio,
                                options.values, options.ties, payload});
}

std::unique_ptr<SavedTensor> RazorSavePolicy::pack_razored(const Tensor& t, const RazorPackOptions& options) const {
    if (!config_.dedup) return RazoredTensor::pack(t, options);
    if (auto handle = cached(t, Form::Razored, options)) return RazoredTensor::from_payload(handle, t.shape());
    std::unique_ptr<RazoredTensor> packed = RazoredTensor::pack(t, options);   // outside the lock: the slow part
    remember(t, Form::Razored, options, packed->payload_handle());
    return packed;
}

// Attention's P is saved by softmax and again by the P.V matmul: with --razor-attn int8 both share one int8 copy.
std::unique_ptr<SavedTensor> RazorSavePolicy::pack_dense_coded(const Tensor& t, ValueCodec codec) const {
    if (!config_.dedup) return DenseCodedTensor::pack(t, codec);
    const Form form = codec == ValueCodec::F16 ? Form::DenseF16 : Form::DenseI8;
    RazorPackOptions key;
    key.values = codec;
    if (auto handle = cached(t, form, key))
        return DenseCodedTensor::from_storage(
            std::static_pointer_cast<Storage>(std::const_pointer_cast<void>(handle)), t.shape(), codec);
    std::unique_ptr<DenseCodedTensor> packed = DenseCodedTensor::pack(t, codec);
    remember(t, form, key, packed->storage_handle());
    return packed;
}

void RazorSavePolicy::note_output(const Tensor& y, const ChannelAffineRelu& how) const {
    if (!config_.derive_after_batch_norm) return;
    const auto* x = dynamic_cast<const ChannelInt8Tensor*>(how.input);
    if (!x || how.channels != x->channels() || y.shape() != x->shape()) return;
    DerivedEntry e{y.storage(), y.offset(), y.shape(), y.strides(), y.version(), x->storage_handle(),
                   ChannelAffineReluTensor::fold(*x, how.scale, how.shift)};
    std::lock_guard lock(cache_mutex_);
    std::erase_if(derived_, [](const DerivedEntry& d) { return d.source.expired() || d.codes.expired(); });
    derived_.push_back(std::move(e));
}

std::unique_ptr<SavedTensor> RazorSavePolicy::derived(const Tensor& t) const {
    std::lock_guard lock(cache_mutex_);
    std::erase_if(derived_, [](const DerivedEntry& d) { return d.source.expired() || d.codes.expired(); });
    for (const DerivedEntry& e : derived_) {
        if (e.offset != t.offset() || e.version != t.version() || e.shape != t.shape() || e.strides != t.strides() ||
            e.source.lock() != t.storage())
            continue;
        if (std::shared_ptr<Storage> codes = e.codes.lock())
            return std::make_unique<ChannelAffineReluTensor>(t.shape(), std::move(codes), e.affine);
    }
    return nullptr;
}

std::unique_ptr<SavedTensor> RazorSavePolicy::pack(const Tensor& t, const SaveSite& site) const {
    Decision d = decide(site);
    if (d.form != Form::Dense && (t.dtype() != DType::F32 || t.numel() == 0)) d.form = Form::Dense;
    // A conv or linear input the tape holds already, as a BatchNorm's codes (derive_after_batch_norm).
    if (d.form == Form::Razored && site.role == SaveRole::WeightGradOperand && config_.derive_after_batch_norm)
        if (std::unique_ptr<SavedTensor> y = derived(t)) return y;
    switch (d.form) {
        case Form::Razored: return pack_razored(t, d.options);
        case Form::DenseF16: return pack_dense_coded(t, ValueCodec::F16);
        case Form::DenseI8: return pack_dense_coded(t, ValueCodec::I8);
        case Form::GeluCode: return GeluDerivativeCode::pack(t);
        // A BN input (a conv's output) is saved by its BN alone: nothing to share, so no deduplication.
        case Form::ChannelI8:
            if (t.dim() >= 2) return ChannelInt8Tensor::pack(t);
            break;
        case Form::Dense: break;
    }
    return std::make_unique<DenseSaved>(t, std::string(site.op), site.role != SaveRole::Parameter);
}

}  // namespace razor::sparse
