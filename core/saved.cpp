// core/saved.cpp -- saved-tensor seam: roles, dense and mask forms, the dense policy, contexts (see saved.h; the
// accounting they report to is core/tape.cpp).
#include "core/saved.h"

#include <algorithm>

#include "core/check.h"
#include "core/tape.h"

namespace razor {

const char* save_kind_name(SaveKind kind) {
    switch (kind) {
        case SaveKind::Activation: return "activation";
        case SaveKind::Mask: return "mask";
        case SaveKind::Indices: return "indices";
        case SaveKind::Statistics: return "statistics";
        case SaveKind::Parameter: return "parameter";
    }
    return "?";
}

const char* save_role_name(SaveRole role) {
    switch (role) {
        case SaveRole::WeightGradOperand: return "weight-grad-operand";
        case SaveRole::InputGradOperand: return "input-grad-operand";
        case SaveRole::BatchNormInput: return "batch-norm-input";
        case SaveRole::LayerNormInput: return "layer-norm-input";
        case SaveRole::GeluInput: return "gelu-input";
        case SaveRole::PointwiseOperand: return "pointwise-operand";
        case SaveRole::LossOperand: return "loss-operand";
        case SaveRole::Mask: return "mask";
        case SaveRole::Indices: return "indices";
        case SaveRole::Statistics: return "statistics";
        case SaveRole::Parameter: return "parameter";
    }
    return "?";
}

// ---------------------------------------------------------------- stored forms

DenseSaved::DenseSaved(const Tensor& t, std::string op, bool counted)
    : SavedTensor(t.shape(), t.dtype()), tensor_(t.detach()), version_(t.version()), op_(std::move(op)),
      counted_(counted) {}

void SavedTensor::unpack_rows(int64_t first, int64_t count, float* dst) const {
    const Tensor all = unpack().contiguous();
    RAZOR_CHECK(all.dtype() == DType::F32 && all.dim() > 0 && first >= 0 && first + count <= all.size(0))
        << "unpack_rows: rows [" << first << ", " << first + count << ") of " << shape_str(all.shape());
    const int64_t row = all.numel() / all.size(0);
    std::copy(all.f32() + first * row, all.f32() + (first + count) * row, dst);
}

Tensor DenseSaved::unpack() const {
    if (tensor_.version() != version_)
        throw Error(fmt(op_, ": a tensor ", shape_str(shape()), " saved for backward was modified in place after it ",
                        "was saved (version ", version_, " -> ", tensor_.version(),
                        "), so its gradient would be wrong; hint: use the out-of-place op, or clone() the tensor "
                        "before modifying it"));
    return tensor_;
}

// The whole storage is held, even when only a view of it was saved.
int64_t DenseSaved::stored_bytes() const {
    return counted_ ? static_cast<int64_t>(tensor_.storage()->bytes) : 0;
}

MaskSaved::MaskSaved(BitMask bits, Shape shape) : SavedTensor(std::move(shape), DType::F32), bits_(std::move(bits)) {
    RAZOR_CHECK_EQ(bits_.size(), shape_numel(this->shape()));
}

Tensor MaskSaved::unpack() const {
    Tensor t = Tensor::empty(shape());
    float* p = t.f32();
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] = bits_.get(i) ? 1.f : 0.f;
    return t;
}

std::unique_ptr<SavedTensor> DenseSavePolicy::pack(const Tensor& t, const SaveSite& site) const {
    return std::make_unique<DenseSaved>(t, std::string(site.op), site.role != SaveRole::Parameter);
}

// ---------------------------------------------------------------- name scopes

namespace {
thread_local std::vector<std::string> t_name_stack;
}  // namespace

NameScope::NameScope(const std::string& name) { t_name_stack.push_back(name); }
NameScope::~NameScope() { t_name_stack.pop_back(); }

std::string current_module_path() {
    std::string path;
    for (const auto& part : t_name_stack) {
        if (part.empty()) continue;
        if (!path.empty()) path += '.';
        path += part;
    }
    return path;
}

// ---------------------------------------------------------------- context

void SavedContext::bind(std::string op, std::string module_path) {
    op_ = std::move(op);
    module_path_ = std::move(module_path);
}

Tape& SavedContext::tape() {
    if (!tape_) tape_ = current_tape_handle();
    return *tape_;
}

void SavedContext::save(const std::string& name, const Tensor& t, SaveRole role) {
    RAZOR_CHECK(t.defined()) << op_ << ": saving undefined tensor '" << name << "'";
    SaveSite site{op_, module_path_, name, role};
    add_item(name, tape().save_policy().pack(t, site), role, role == SaveRole::Parameter ? nullptr : t.storage());
}

void SavedContext::save_mask(const std::string& name, BitMask bits, const Shape& shape) {
    add_item(name, std::make_unique<MaskSaved>(std::move(bits), shape), SaveRole::Mask, nullptr);
}

void SavedContext::note_output(const Tensor& y, const std::string& input, const std::vector<float>& scale,
                               const std::vector<float>& shift) {
    RAZOR_CHECK(scale.size() == shift.size()) << op_ << ": note_output with " << scale.size() << " scales and "
                                              << shift.size() << " shifts";
    const ChannelAffineRelu how{&saved(input), scale.data(), shift.data(), static_cast<int64_t>(scale.size())};
    tape().save_policy().note_output(y, how);
}

void SavedContext::add_item(const std::string& name, std::unique_ptr<SavedTensor> stored, SaveRole role,
                            const std::shared_ptr<Storage>& source) {
    RAZOR_CHECK(!released_) << op_ << ": save after release";
    RAZOR_CHECK(!has(name)) << op_ << ": '" << name << "' saved twice";
    const SaveKind kind = save_kind(role);
    // The dense-equivalent is what DenseSavePolicy would store: a reference to the whole storage (DenseSaved), or
    // for a mask the same bits; parameters are held by the model anyway.
    const int64_t dense = kind == SaveKind::Parameter ? 0
                          : source                    ? static_cast<int64_t>(source->bytes)
                                                      : stored->stored_bytes();
    SavedRecord record{0, op_, module_path_, name, kind, stored->format(), stored->shape(), stored->stored_bytes(),
                       dense, role};
    const uint64_t id = tape().add(std::move(record), stored->shared_storage(), source);
    items_.push_back(Item{name, role, std::move(stored), id});
}

const SavedContext::Item& SavedContext::find(const std::string& name) const {
    if (released_)
        throw Error(fmt(op_, ": saved tensor '", name, "' was already freed by an earlier backward; hint: pass "
                        "retain_graph=true to the first backward, or run the forward again"));
    for (const Item& item : items_)
        if (item.name == name) return item;
    RAZOR_CHECK(false) << op_ << ": no saved tensor named '" << name << "'";
    return items_.front();   // unreachable
}

bool SavedContext::has(const std::string& name) const {
    return std::any_of(items_.begin(), items_.end(), [&](const Item& item) { return item.name == name; });
}

Tensor SavedContext::unpack(const std::string& name) const { return find(name).stored->unpack(); }
const SavedTensor& SavedContext::saved(const std::string& name) const { return *find(name).stored; }

const BitMask& SavedContext::mask(const std::string& name) const {
    const auto* mask = dynamic_cast<const MaskSaved*>(find(name).stored.get());
    RAZOR_CHECK(mask != nullptr) << op_ << ": saved tensor '" << name << "' is not a mask";
    return mask->bits();
}

void SavedContext::release() {
    for (const Item& item : items_) tape_->remove(item.record_id);
    items_.clear();
    tape_.reset();
    released_ = true;
}

}  // namespace razor
