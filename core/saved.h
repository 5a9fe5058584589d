// core/saved.h -- the saved-tensor seam: what the tape keeps for backward, in which form, at what cost.
//
// reference: torch.autograd.graph.saved_tensors_hooks (pack/unpack) and SavedVariable (version check).
// docs: ../docs/architecture.md "The two seams", docs/back-razor.md.
//
// An op never stores a raw tensor for backward. In its forward it hands each item to its node's context:
//
//     node->ctx.save("x", x, SaveKind::Activation);     // policy decides: dense, pruned bitmap+values, ...
//     node->ctx.save("W", W, SaveKind::Parameter);      // by reference, 0 bytes, version-checked
//     node->ctx.save_mask("mask", std::move(bits));     // already 1 bit per element
//
// and in backward asks for it back:
//
//     Tensor x = ctx.unpack("x");                       // dense fp32 transient, freed when backward returns
//     const SavedTensor& s = ctx.saved("x");            // the stored form, for kernels that use it directly
//
// The active SavePolicy (set per scope with SavePolicyGuard; modules set theirs around their forward) turns
// each item into a SavedTensor. Ops do not know which policy is active. Every SavedTensor reports its stored
// bytes and its dense-equivalent bytes to TapeAccounting, attributed to the op and module path that saved it.
// After a node's backward the engine calls ctx.release(): the stored forms are destroyed and the accounting
// drops back.
//
// Kinds (what the item *is*; the policy's only input besides the site):
//   Activation  a layer's input/output kept for a weight or input gradient. Back Razor prunes these.
//   Mask        a 0/1 pattern (ReLU, dropout). Stored as 1 bit per element.
//   Indices     argmax positions, gather indices. Kept exact.
//   Statistics  small per-row/per-channel values (mean, rstd). Kept exact and dense.
//   Parameter   a weight held by reference: not copied, not counted, but version-checked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/bitmask.h"
#include "core/tensor.h"

namespace razor {

enum class SaveKind : uint8_t { Activation, Mask, Indices, Statistics, Parameter };
const char* save_kind_name(SaveKind kind);

// Where an item is saved: the policy may decide per op, per module path, per item name.
struct SaveSite {
    std::string_view op;            // "conv2d"
    std::string_view module_path;   // "layer1.0.conv1" (empty outside modules)
    std::string_view name;          // "x"
    SaveKind kind;
};

// The stored form of one saved item. Subclasses: DenseSaved (here), MaskSaved (here), and the Back Razor codecs
// in sparse/ (bitmap + fp32/fp16/int8 values).
class SavedTensor {
public:
    virtual ~SavedTensor() = default;
    virtual Tensor unpack() const = 0;                 // dense, in the dtype that was saved
    virtual int64_t stored_bytes() const = 0;          // bytes this form physically holds
    virtual std::string format() const = 0;            // "dense", "bits", "bitmap+f32 r=0.90", ...
    // The storage this form keeps alive, if it shares one with live tensors (dense references do); used to
    // count a storage saved by several nodes once.
    virtual const Storage* shared_storage() const { return nullptr; }
    // Samples [first, first + count) along dim 0 of the dense f32 form (numel / size(0) elements each) into dst, so
    // a backward kernel can expand one image at a time into a small scratch buffer instead of a whole-tensor
    // transient (conv2d's gW). Cheap only where has_row_unpack() is true (forms that store samples independently);
    // the default expands everything and copies the rows. Serial: callers run it inside their own parallel loops.
    virtual bool has_row_unpack() const { return false; }
    virtual void unpack_rows(int64_t first, int64_t count, float* dst) const;
    // out[i] = g[i] * f(v[i]) over all elements, where v is what unpack() would give -- for forms that store every
    // element as one of a few values (Back Razor's 4-bit GELU code), with f evaluated once per value instead of per
    // element and nothing unpacked. False (nothing written) for forms without such a codebook: the caller unpacks.
    virtual bool multiply_by_codebook(float (*f)(float), const float* g, float* out) const {
        (void)f, (void)g, (void)out;
        return false;
    }

    const Shape& shape() const { return shape_; }
    DType dtype() const { return dtype_; }
    int64_t dense_bytes() const { return shape_numel(shape_) * static_cast<int64_t>(dtype_size(dtype_)); }

protected:
    SavedTensor(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {}

private:
    Shape shape_;
    DType dtype_;
};

// Keeps a reference to the tensor's storage (no copy). Unpack checks the version counter: an in-place write
// after the save makes the gradient wrong, so it is an error naming the op.
class DenseSaved final : public SavedTensor {
public:
    DenseSaved(const Tensor& t, std::string op, bool counted);
    Tensor unpack() const override;
    int64_t stored_bytes() const override;
    std::string format() const override { return counted_ ? "dense" : "reference"; }
    const Storage* shared_storage() const override { return counted_ ? tensor_.storage().get() : nullptr; }

private:
    Tensor tensor_;         // detached alias
    uint64_t version_;
    std::string op_;
    bool counted_;          // false for parameters (held by the model anyway)
};

// A 0/1 mask at 1 bit per element. Unpacks to F32 0/1. Dense-equivalent: the fp32 tensor PyTorch would keep.
class MaskSaved final : public SavedTensor {
public:
    MaskSaved(BitMask bits, Shape shape);
    Tensor unpack() const override;
    int64_t stored_bytes() const override { return bits_.nbytes(); }
    std::string format() const override { return "bits"; }
    const BitMask& bits() const { return bits_; }

private:
    BitMask bits_;
};

// Decides the stored form of each saved item. Implementations must be thread-compatible (const pack).
class SavePolicy {
public:
    virtual ~SavePolicy() = default;
    virtual std::string name() const = 0;
    virtual std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const = 0;
};

// Every item dense (parameters by reference). razor's default, and PyTorch's.
class DenseSavePolicy final : public SavePolicy {
public:
    std::string name() const override { return "dense"; }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override;
};

// The policy in force on this thread (innermost SavePolicyGuard, else the process default = dense).
const SavePolicy& active_save_policy();
void set_default_save_policy(std::shared_ptr<const SavePolicy> policy);   // nullptr restores dense

class SavePolicyGuard {
public:
    explicit SavePolicyGuard(std::shared_ptr<const SavePolicy> policy);   // nullptr: keep the outer policy
    ~SavePolicyGuard();
    SavePolicyGuard(const SavePolicyGuard&) = delete;
    SavePolicyGuard& operator=(const SavePolicyGuard&) = delete;

private:
    bool pushed_;
};

// Module path for attribution: modules push their name around forward ("layer1" then "0" -> "layer1.0").
class NameScope {
public:
    explicit NameScope(const std::string& name);
    ~NameScope();
    NameScope(const NameScope&) = delete;
    NameScope& operator=(const NameScope&) = delete;
};
std::string current_module_path();

// ---- the per-node context ----
class SavedContext {
public:
    SavedContext() = default;
    ~SavedContext() { release(); }
    SavedContext(const SavedContext&) = delete;
    SavedContext& operator=(const SavedContext&) = delete;

    // Called by the node that owns this context when it is recorded.
    void bind(std::string op, std::string module_path);

    void save(const std::string& name, const Tensor& t, SaveKind kind);   // through the active policy
    void save_mask(const std::string& name, BitMask bits, const Shape& shape);
    void save_stored(const std::string& name, std::unique_ptr<SavedTensor> stored, SaveKind kind);

    Tensor unpack(const std::string& name) const;       // dense transient
    const SavedTensor& saved(const std::string& name) const;
    const BitMask& mask(const std::string& name) const;
    bool has(const std::string& name) const;

    void release();                  // destroy every stored form; called right after the node's backward
    bool released() const { return released_; }
    int64_t stored_bytes() const;
    int64_t dense_bytes() const;

private:
    struct Item {
        std::string name;
        SaveKind kind;
        std::unique_ptr<SavedTensor> stored;
        uint64_t record_id;
    };
    const Item& find(const std::string& name) const;

    std::string op_;
    std::string module_path_;
    std::vector<Item> items_;
    bool released_ = false;
};

// ---- accounting: the bytes the tape holds right now, and their peak ----
struct SavedRecord {
    uint64_t id;
    std::string op;
    std::string module_path;
    std::string name;
    SaveKind kind;
    std::string format;
    Shape shape;
    int64_t stored_bytes;    // what this item holds itself (0 if its storage was already counted)
    int64_t dense_bytes;     // what a dense fp32 tape would hold for it (0 for parameters)
};

struct TapeTotals {
    int64_t stored_bytes = 0;
    int64_t dense_bytes = 0;
    int64_t items = 0;
};

class TapeAccounting {
public:
    static TapeAccounting& instance();

    TapeTotals live() const;
    TapeTotals peak() const;             // highest stored_bytes since reset_peak (with its dense bytes)
    void reset_peak();
    std::vector<SavedRecord> records() const;   // live records in save order
    // A table of the live tape grouped by module path and op: items, stored, dense-equivalent, ratio.
    std::string report() const;

    // used by SavedContext
    uint64_t add(SavedRecord record, const Storage* shared);
    void remove(uint64_t id);

private:
    TapeAccounting() = default;
    struct Impl;
    Impl& impl() const;
};

std::string format_bytes(int64_t bytes);   // "61.2 MiB"

}  // namespace razor
