// core/tape.cpp -- the tape object: accounting with dedup by storage, the save-policy stack, the per-thread current
// tape (see tape.h).
#include "core/tape.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "core/check.h"

namespace razor {

std::string format_bytes(int64_t bytes) {
    char buf[32];
    const double b = static_cast<double>(bytes);
    if (bytes >= (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
    else if (bytes >= (int64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
    else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
    else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    return buf;
}

// ---------------------------------------------------------------- accounting

namespace {
// A saved tensor's values, for the dense-equivalent: its storage (owner_less: by control block, which the weak
// reference keeps allocated) at one version.
struct Source {
    std::weak_ptr<Storage> storage;
    uint64_t version = 0;
    bool operator<(const Source& o) const {
        const std::owner_less<std::weak_ptr<Storage>> less;
        if (less(storage, o.storage)) return true;
        if (less(o.storage, storage)) return false;
        return version < o.version;
    }
    bool operator==(const Source& o) const { return !(*this < o) && !(o < *this); }
};
}  // namespace

struct Tape::Accounts {
    uint64_t next_id = 1;
    std::map<uint64_t, SavedRecord> records;               // ordered by id = save order
    // dedupe: a storage held by several saved forms counts once, carried by one of them (carried = its bytes; 0 for
    // the others, which count only what they hold beside it)
    struct SharedRef {
        const Storage* storage;
        int64_t carried;
    };
    std::unordered_map<uint64_t, SharedRef> shared_of;
    std::unordered_map<const Storage*, int> storage_refs;
    // the same for the dense-equivalent, by the saved tensor's storage and its version: a storage that an op wrote
    // over after one save (gelu(Tensor&&), add(Tensor&&, b): only where that save is a packed copy) holds other
    // values at the next save, which a dense tape would have had to keep as a second tensor
    std::unordered_map<uint64_t, Source> source_of;
    std::map<Source, int> source_refs;
    TapeTotals live;
    TapeTotals peak;
};

Tape::Tape(std::shared_ptr<const SavePolicy> base)
    : accounts_(std::make_unique<Accounts>()), base_policy_(std::move(base)), owner_(std::this_thread::get_id()) {}
Tape::~Tape() = default;

uint64_t Tape::add(SavedRecord record, const Storage* shared, const std::shared_ptr<Storage>& source) {
    sync();
    Accounts& s = *accounts_;
    record.id = s.next_id++;
    if (shared) {
        const auto bytes = static_cast<int64_t>(shared->bytes);
        const bool first = s.storage_refs[shared]++ == 0;
        // Already counted by an earlier save: this form adds only what it holds beside the storage (a form derived
        // from another's payload, sparse/channel_int8.h, holds a small table; a shared copy holds nothing more).
        if (!first) record.stored_bytes = std::max<int64_t>(0, record.stored_bytes - bytes);
        s.shared_of[record.id] = Accounts::SharedRef{shared, first ? std::min(bytes, record.stored_bytes) : 0};
    }
    if (source) {
        Source key{source, source->version};
        if (s.source_refs[key]++ > 0) record.dense_bytes = 0;   // the dense tape would share that storage
        s.source_of.emplace(record.id, std::move(key));
    }
    s.live.stored_bytes += record.stored_bytes;
    s.live.dense_bytes += record.dense_bytes;
    s.live.items += 1;
    if (s.live.stored_bytes > s.peak.stored_bytes) s.peak.stored_bytes = s.live.stored_bytes, s.peak.items = s.live.items;
    s.peak.dense_bytes = std::max(s.peak.dense_bytes, s.live.dense_bytes);
    const uint64_t id = record.id;
    s.records.emplace(id, std::move(record));
    return id;
}

void Tape::remove(uint64_t id) {
    if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
        sync();
        apply_remove(id);
        return;
    }
    // Another thread (a graph released elsewhere, or after this tape's thread moved on): queue it.
    std::lock_guard lock(foreign_mutex_);
    foreign_.push_back(id);
    has_foreign_.store(true, std::memory_order_release);
}

void Tape::drain_foreign() const {
    std::vector<uint64_t> ids;
    {
        std::lock_guard lock(foreign_mutex_);
        ids.swap(foreign_);
        has_foreign_.store(false, std::memory_order_release);
    }
    for (uint64_t id : ids) apply_remove(id);
}

void Tape::apply_remove(uint64_t id) const {
    Accounts& s = *accounts_;
    auto it = s.records.find(id);
    RAZOR_CHECK(it != s.records.end()) << "tape accounting: unknown record " << id;
    const SavedRecord& r = it->second;
    s.live.stored_bytes -= r.stored_bytes;
    s.live.dense_bytes -= r.dense_bytes;
    s.live.items -= 1;
    if (auto sh = s.shared_of.find(id); sh != s.shared_of.end()) {
        const Accounts::SharedRef ref = sh->second;
        s.shared_of.erase(sh);
        if (--s.storage_refs[ref.storage] == 0) {
            s.storage_refs.erase(ref.storage);
            // If this record carried the storage's bytes but another record still holds the storage, move the
            // bytes to that record so the live total stays the bytes physically held.
        } else if (ref.carried > 0) {
            for (auto& [other_id, other] : s.shared_of) {
                if (other.storage != ref.storage) continue;
                other.carried = ref.carried;
                s.records[other_id].stored_bytes += ref.carried;
                s.live.stored_bytes += ref.carried;
                break;
            }
        }
    }
    if (auto so = s.source_of.find(id); so != s.source_of.end()) {
        const Source source = std::move(so->second);
        s.source_of.erase(so);
        auto refs = s.source_refs.find(source);
        if (--refs->second == 0) {
            s.source_refs.erase(refs);
        } else if (r.dense_bytes > 0) {   // as above: another live item now carries the source's dense bytes
            for (auto& [other_id, other_source] : s.source_of) {
                if (!(other_source == source)) continue;
                s.records[other_id].dense_bytes = r.dense_bytes;
                s.live.dense_bytes += r.dense_bytes;
                break;
            }
        }
    }
    s.records.erase(it);
}

TapeTotals Tape::live() const {
    sync();
    return accounts_->live;
}

TapeTotals Tape::peak() const {
    sync();
    return accounts_->peak;
}

void Tape::reset_peak() {
    sync();
    accounts_->peak = accounts_->live;
}

std::vector<SavedRecord> Tape::records() const {
    sync();
    std::vector<SavedRecord> out;
    out.reserve(accounts_->records.size());
    for (const auto& [id, r] : accounts_->records) out.push_back(r);
    return out;
}

std::string Tape::report() const {
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

// ---------------------------------------------------------------- save policies

const SavePolicy& Tape::save_policy() const {
    static const DenseSavePolicy dense;   // immutable
    if (!policies_.empty()) return *policies_.back();
    return base_policy_ ? *base_policy_ : dense;
}

std::shared_ptr<const SavePolicy> Tape::save_policy_handle() const {
    return policies_.empty() ? base_policy_ : policies_.back();
}

void Tape::push_save_policy(std::shared_ptr<const SavePolicy> policy) {
    RAZOR_CHECK(policy != nullptr) << "Tape::push_save_policy: null policy; hint: SavePolicyGuard(nullptr) keeps the "
                                      "outer policy without pushing";
    policies_.push_back(std::move(policy));
}

void Tape::pop_save_policy() {
    RAZOR_CHECK(!policies_.empty()) << "Tape::pop_save_policy: no policy pushed on this tape";
    policies_.pop_back();
}

SavePolicyGuard::SavePolicyGuard(std::shared_ptr<const SavePolicy> policy) {
    if (!policy) return;
    tape_ = current_tape_handle();
    tape_->push_save_policy(std::move(policy));
}

SavePolicyGuard::~SavePolicyGuard() {
    if (tape_) tape_->pop_save_policy();
}

// ---------------------------------------------------------------- the current tape of this thread

namespace {
thread_local std::vector<std::shared_ptr<Tape>> t_scopes;   // innermost last
const std::shared_ptr<Tape>& thread_default_tape() {
    thread_local const std::shared_ptr<Tape> tape = std::make_shared<Tape>();
    return tape;
}
}  // namespace

const std::shared_ptr<Tape>& current_tape_handle() {
    return t_scopes.empty() ? thread_default_tape() : t_scopes.back();
}

Tape& current_tape() { return *current_tape_handle(); }

TapeScope::TapeScope() : TapeScope(std::make_shared<Tape>(current_tape().save_policy_handle())) {}

TapeScope::TapeScope(std::shared_ptr<Tape> tape) : tape_(std::move(tape)) {
    RAZOR_CHECK(tape_ != nullptr) << "TapeScope: null tape; hint: TapeScope() makes a fresh one";
    tape_->owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    t_scopes.push_back(tape_);
}

TapeScope::~TapeScope() {
    // Scopes are stack objects: the innermost one ends first. Find ours from the top in case of misuse.
    for (auto it = t_scopes.rbegin(); it != t_scopes.rend(); ++it)
        if (it->get() == tape_.get()) {
            t_scopes.erase(std::next(it).base());
            break;
        }
}

}  // namespace razor
