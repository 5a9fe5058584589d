// core/tape.h -- the tape as an object: what the saved state of the recorded graph costs, and which save policy
// decides its stored forms.
//
// reference: torch.autograd.graph.saved_tensors_hooks (a per-thread stack of pack hooks) and
// torch.cuda.memory_stats (live/peak totals). docs: ../docs/autograd.md "The tape".
//
// A Tape holds
//   * the accounting of every item saved into it: live and peak totals (a storage saved by several nodes counts
//     once), the live records in save order, and report(), a table grouped by module path and op;
//   * a stack of save policies: the innermost SavePolicyGuard's, else the tape's base policy (dense unless given).
// Each thread has a default tape. A TapeScope makes another one current on this thread until it ends; scopes nest:
//
//     SavePolicyGuard razor(std::make_shared<sparse::RazorSavePolicy>());
//     TapeScope step;                                     // a fresh tape for this step, starting with that policy
//     Tensor loss = cross_entropy(model(x), y);           // saves go to step.tape(), packed by the razor policy
//     const TapeTotals peak = step.tape().peak();         // this step's peak, nothing else's
//     loss.backward();                                    // every record goes away again
//
// Threads: a tape belongs to the thread it is current on (the one that made it current last): records are added
// and totals read there, without locks. A SavedContext holds the tape it saved into, so its records are removed
// from that tape however long it lives, even after the TapeScope ended; a release on another thread is queued and
// applied by the tape's next operation (one atomic load per operation when nothing is queued). Reading a tape's
// totals from another thread is only safe while its own thread is not using it (e.g. after a join).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/saved.h"

namespace razor {

struct SavedRecord {
    uint64_t id;
    std::string op;
    std::string module_path;
    std::string name;
    SaveKind kind;
    std::string format;
    Shape shape;
    int64_t stored_bytes;    // what this item holds itself (0 if its storage was already counted)
    // What razor's dense tape (DenseSavePolicy) would hold for it, deduplicated the same way: the saved tensor's
    // storage, counted once however many items saved it (0 if an earlier live item did; 0 for parameters); a mask's
    // own bits (the dense tape keeps masks as bits too).
    int64_t dense_bytes;
    SaveRole role = SaveRole::Parameter;   // what the item is for (kind == save_kind(role) for saved items)
};

// In a peak, stored_bytes and dense_bytes are each their own maximum (they may peak at different moments): the dense
// peak is what the same steps would have peaked at with a dense tape.
struct TapeTotals {
    int64_t stored_bytes = 0;
    int64_t dense_bytes = 0;
    int64_t items = 0;   // at the stored peak
};

// Shared by handle (std::shared_ptr: TapeScope, SavedContext), never copied.
class Tape {
public:
    // `base`: the policy under an empty stack (nullptr: the dense policy).
    explicit Tape(std::shared_ptr<const SavePolicy> base = nullptr);
    Tape(const Tape&) = delete;
    Tape& operator=(const Tape&) = delete;
    ~Tape();

    // ---- accounting: the bytes this tape holds right now, and their peak
    TapeTotals live() const;
    TapeTotals peak() const;             // highest stored_bytes and highest dense_bytes since reset_peak
    void reset_peak();                   // peak := live
    std::vector<SavedRecord> records() const;   // live records in save order
    // A table of the live records grouped by module path and op: items, stored, dense-equivalent, ratio.
    std::string report() const;

    // ---- save policies (SavePolicyGuard pushes and pops; Module::set_save_policy uses the guard)
    const SavePolicy& save_policy() const;   // the innermost pushed policy, else the base policy
    std::shared_ptr<const SavePolicy> save_policy_handle() const;   // the same; nullptr for the dense policy
    void push_save_policy(std::shared_ptr<const SavePolicy> policy);   // non-null
    void pop_save_policy();

    // ---- used by SavedContext
    // On the tape's thread; returns the record id. `shared`: the storage the stored form keeps alive, counted once
    // in stored bytes; `source`: the storage of the tensor that was saved (null for masks), counted once in dense
    // bytes. The tape keeps only a weak reference to the source, which also keeps its address from being reused
    // while the record lives, so a compressed item's freed source is never mistaken for a new tensor.
    uint64_t add(SavedRecord record, const Storage* shared, const std::shared_ptr<Storage>& source);
    void remove(uint64_t id);            // from any thread: queued when not on the tape's thread

private:
    friend class TapeScope;
    void apply_remove(uint64_t id) const;   // the accounts behind accounts_ are the owner's working state
    void drain_foreign() const;          // applies the removals queued by other threads
    void sync() const {
        if (has_foreign_.load(std::memory_order_acquire)) drain_foreign();
    }

    struct Accounts;
    std::unique_ptr<Accounts> accounts_;   // records, dedup table, totals (touched by the tape's thread only)
    std::shared_ptr<const SavePolicy> base_policy_;   // under the stack (null: dense)
    std::vector<std::shared_ptr<const SavePolicy>> policies_;
    std::atomic<std::thread::id> owner_;   // the thread the tape belongs to
    mutable std::mutex foreign_mutex_;     // guards foreign_ only: never taken by a save on the tape's thread
    mutable std::vector<uint64_t> foreign_;   // record ids released on other threads
    mutable std::atomic<bool> has_foreign_{false};
};

// Makes a tape the current tape of this thread until the scope ends (and makes this thread its owner).
class TapeScope {
public:
    // A fresh tape whose base policy is the one in force here (active_save_policy()), so measuring a step on its own
    // tape never changes how it is saved.
    TapeScope();
    explicit TapeScope(std::shared_ptr<Tape> tape);   // `tape` as it is (its own policy stack)
    ~TapeScope();
    TapeScope(const TapeScope&) = delete;
    TapeScope& operator=(const TapeScope&) = delete;

    Tape& tape() const { return *tape_; }
    const std::shared_ptr<Tape>& handle() const { return tape_; }

private:
    std::shared_ptr<Tape> tape_;
};

// The innermost TapeScope's tape on this thread, else this thread's default tape.
Tape& current_tape();
const std::shared_ptr<Tape>& current_tape_handle();

// The save policy in force: current_tape().save_policy().
inline const SavePolicy& active_save_policy() { return current_tape().save_policy(); }

// Pushes a policy on the current tape for a scope (nullptr: keep the outer policy).
class SavePolicyGuard {
public:
    explicit SavePolicyGuard(std::shared_ptr<const SavePolicy> policy);
    ~SavePolicyGuard();
    SavePolicyGuard(const SavePolicyGuard&) = delete;
    SavePolicyGuard& operator=(const SavePolicyGuard&) = delete;

private:
    std::shared_ptr<Tape> tape_;   // the tape pushed onto (null: nothing pushed), popped from the same one
};

std::string format_bytes(int64_t bytes);   // "61.2 MiB"

}  // namespace razor
