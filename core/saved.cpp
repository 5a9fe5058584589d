// core/saved.cpp -- saved-tensor seam: dense and mask forms, policies, contexts, accounting (see saved.h).
#include "core/saved.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/check.h"

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

std::string format_bytes(int64_t bytes) {
    char buf[32];
    const double b = static_cast<double>(bytes);
    if (bytes >= (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
    else if (bytes >= (int64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
    else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
    else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    return buf;
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
    return std::make_unique<DenseSaved>(t, std::string(site.op), site.kind != SaveKind::Parameter);
}

// ---------------------------------------------------------------- policy and name scopes

namespace {
std::shared_ptr<const SavePolicy>& default_policy_slot() {
    static std::shared_ptr<const SavePolicy> policy = std::make_shared<DenseSavePolicy>();
    return policy;
}
thread_local std::vector<std::shared_ptr<const SavePolicy>> t_policy_stack;
thread_local std::vector<std::string> t_name_stack;
}  // namespace

const SavePolicy& active_save_policy() {
    if (!t_policy_stack.empty()) return *t_policy_stack.back();
    return *default_policy_slot();
}

void set_default_save_policy(std::shared_ptr<const SavePolicy> policy) {
    default_policy_slot() = policy ? std::move(policy) : std::make_shared<DenseSavePolicy>();
}

SavePolicyGuard::SavePolicyGuard(std::shared_ptr<const SavePolicy> policy) : pushed_(policy != nullptr) {
    if (pushed_) t_policy_stack.push_back(std::move(policy));
}
SavePolicyGuard::~SavePolicyGuard() {
    if (pushed_) t_policy_stack.pop_back();
}

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

void SavedContext::save(const std::string& name, const Tensor& t, SaveKind kind) {
    RAZOR_CHECK(t.defined()) << op_ << ": saving undefined tensor '" << name << "'";
    SaveSite site{op_, module_path_, name, kind};
    save_stored(name, active_save_policy().pack(t, site), kind);
}

void SavedContext::save_mask(const std::string& name, BitMask bits, const Shape& shape) {
    save_stored(name, std::make_unique<MaskSaved>(std::move(bits), shape), SaveKind::Mask);
}

void SavedContext::save_stored(const std::string& name, std::unique_ptr<SavedTensor> stored, SaveKind kind) {
    RAZOR_CHECK(!released_) << op_ << ": save after release";
    RAZOR_CHECK(!has(name)) << op_ << ": '" << name << "' saved twice";
    SavedRecord record{0,
                       op_,
                       module_path_,
                       name,
                       kind,
                       stored->format(),
                       stored->shape(),
                       stored->stored_bytes(),
                       kind == SaveKind::Parameter ? 0 : stored->dense_bytes()};
    uint64_t id = TapeAccounting::instance().add(std::move(record), stored->shared_storage());
    items_.push_back(Item{name, kind, std::move(stored), id});
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
    for (const Item& item : items_) TapeAccounting::instance().remove(item.record_id);
    items_.clear();
    released_ = true;
}

int64_t SavedContext::stored_bytes() const {
    int64_t total = 0;
    for (const Item& item : items_) total += item.stored->stored_bytes();
    return total;
}

int64_t SavedContext::dense_bytes() const {
    int64_t total = 0;
    for (const Item& item : items_)
        if (item.kind != SaveKind::Parameter) total += item.stored->dense_bytes();
    return total;
}

// ---------------------------------------------------------------- accounting

struct TapeAccounting::Impl {
    std::mutex mutex;
    uint64_t next_id = 1;
    std::map<uint64_t, SavedRecord> records;               // ordered by id = save order
    std::unordered_map<uint64_t, const Storage*> shared_of;
    std::unordered_map<const Storage*, int> storage_refs;  // dedupe: a storage saved by several nodes counts once
    TapeTotals live;
    TapeTotals peak;
};

TapeAccounting& TapeAccounting::instance() {
    static TapeAccounting accounting;
    return accounting;
}

TapeAccounting::Impl& TapeAccounting::impl() const {
    static Impl state;
    return state;
}

uint64_t TapeAccounting::add(SavedRecord record, const Storage* shared) {
    Impl& s = impl();
    std::lock_guard lock(s.mutex);
    record.id = s.next_id++;
    if (shared) {
        if (s.storage_refs[shared]++ > 0) record.stored_bytes = 0;   // already counted by an earlier save
        s.shared_of[record.id] = shared;
    }
    s.live.stored_bytes += record.stored_bytes;
    s.live.dense_bytes += record.dense_bytes;
    s.live.items += 1;
    if (s.live.stored_bytes > s.peak.stored_bytes ||
        (s.live.stored_bytes == s.peak.stored_bytes && s.live.dense_bytes > s.peak.dense_bytes))
        s.peak = s.live;
    uint64_t id = record.id;
    s.records.emplace(id, std::move(record));
    return id;
}

void TapeAccounting::remove(uint64_t id) {
    Impl& s = impl();
    std::lock_guard lock(s.mutex);
    auto it = s.records.find(id);
    RAZOR_CHECK(it != s.records.end()) << "tape accounting: unknown record " << id;
    const SavedRecord& r = it->second;
    s.live.stored_bytes -= r.stored_bytes;
    s.live.dense_bytes -= r.dense_bytes;
    s.live.items -= 1;
    if (auto sh = s.shared_of.find(id); sh != s.shared_of.end()) {
        const Storage* storage = sh->second;
        s.shared_of.erase(sh);
        if (--s.storage_refs[storage] == 0) {
            s.storage_refs.erase(storage);
            // If this record carried the storage's bytes but another record still holds the storage, move the
            // bytes to that record so the live total stays the bytes physically held.
        } else if (r.stored_bytes > 0) {
            for (auto& [other_id, other_storage] : s.shared_of) {
                if (other_storage != storage) continue;
                s.records[other_id].stored_bytes = r.stored_bytes;
                s.live.stored_bytes += r.stored_bytes;
                break;
            }
        }
    }
    s.records.erase(it);
}

TapeTotals TapeAccounting::live() const {
    std::lock_guard lock(impl().mutex);
    return impl().live;
}

TapeTotals TapeAccounting::peak() const {
    std::lock_guard lock(impl().mutex);
    return impl().peak;
}

void TapeAccounting::reset_peak() {
    std::lock_guard lock(impl().mutex);
    impl().peak = impl().live;
}

std::vector<SavedRecord> TapeAccounting::records() const {
    std::lock_guard lock(impl().mutex);
    std::vector<SavedRecord> out;
    out.reserve(impl().records.size());
    for (const auto& [id, r] : impl().records) out.push_back(r);
    return out;
}

std::string TapeAccounting::report() const {
    struct Row {
        int64_t items = 0, stored = 0, dense = 0;
        std::string formats;
    };
    std::vector<std::pair<std::string, Row>> rows;   // in first-save order
    std::unordered_map<std::string, size_t> index;
    TapeTotals total;
    for (const SavedRecord& r : records()) {
        std::string key = (r.module_path.empty() ? std::string("-") : r.module_path) + "  " + r.op;
        auto [it, inserted] = index.try_emplace(key, rows.size());
        if (inserted) rows.emplace_back(key, Row{});
        Row& row = rows[it->second].second;
        row.items += 1;
        row.stored += r.stored_bytes;
        row.dense += r.dense_bytes;
        if (row.formats.find(r.format) == std::string::npos) row.formats += (row.formats.empty() ? "" : ",") + r.format;
        total.items += 1;
        total.stored_bytes += r.stored_bytes;
        total.dense_bytes += r.dense_bytes;
    }
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-40s %5s %12s %12s %7s  %s\n", "module  op", "items", "stored", "dense-eq",
                  "ratio", "formats");
    out += line;
    for (const auto& [key, row] : rows) {
        const double ratio = row.stored ? static_cast<double>(row.dense) / row.stored : 0.0;
        std::snprintf(line, sizeof line, "%-40s %5lld %12s %12s %6.1fx  %s\n", key.c_str(),
                      static_cast<long long>(row.items), format_bytes(row.stored).c_str(),
                      format_bytes(row.dense).c_str(), ratio, row.formats.c_str());
        out += line;
    }
    const double ratio = total.stored_bytes ? static_cast<double>(total.dense_bytes) / total.stored_bytes : 0.0;
    std::snprintf(line, sizeof line, "%-40s %5lld %12s %12s %6.1fx\n", "total", static_cast<long long>(total.items),
                  format_bytes(total.stored_bytes).c_str(), format_bytes(total.dense_bytes).c_str(), ratio);
    out += line;
    return out;
}

}  // namespace razor
