// core/saved.h -- the saved-tensor seam: what the tape keeps for backward, in which form, at what cost.
//
// reference: torch.autograd.graph.saved_tensors_hooks (pack/unpack) and SavedVariable (version check).
// docs: ../docs/autograd.md "The tape", docs/back-razor.md.
//
// An op never stores a raw tensor for backward. In its forward it hands each item to its node's context, naming
// what the item is for (its role, below):
//
//     node->ctx.save("x", x, SaveRole::WeightGradOperand);   // policy decides: dense, pruned bitmap+values, ...
//     node->ctx.save("W", W, SaveRole::Parameter);           // by reference, 0 bytes, version-checked
//     node->ctx.save_mask("mask", std::move(bits));          // already 1 bit per element (SaveRole::Mask)
//
// and in backward asks for it back:
//
//     Tensor x = ctx.unpack("x");                       // dense fp32 transient, freed when backward returns
//     const SavedTensor& s = ctx.saved("x");            // the stored form, for kernels that use it directly
//
// The save policy in force on the current tape (core/tape.h: set per scope with SavePolicyGuard; modules set
// theirs around their forward) turns each item into a SavedTensor. Ops do not know which policy is active. Every
// SavedTensor reports its stored bytes and its dense-equivalent bytes to the tape it was saved into, attributed to
// the op and module path that saved it. After a node's backward the engine calls ctx.release(): the stored forms
// are destroyed and that tape's accounting drops back.
//
// Roles: what a saved item is FOR -- which gradient it enters and how. A policy decides on the role alone (never
// on op or item names), so an op that saves under an existing role gets that role's treatment, and a new role is
// a compile warning in every policy that switches on it. Each op's `Saves:` block names the role of every item.
//
//   role                kind        for                                                      saved by
//   WeightGradOperand   Activation  enters only the weight gradient (gW = g^T x); the input  conv2d x, linear x
//                                   and bias gradients do not need it
//   InputGradOperand    Activation  a product operand that enters input gradients            matmul a, b;
//                                   (ga = g b^T, gb = a^T g; softmax gx = P (g - sum g P))   softmax y
//   BatchNormInput      Activation  batch norm's input: x_hat (train) and gamma's gradient   batch_norm x,
//                                                                                            batch_norm_relu x
//   LayerNormInput      Activation  layer norm's input: x_hat and gamma's gradient           layer_norm x
//   GeluInput           Activation  GELU's input: backward needs only GELU'(x)               gelu x
//   PointwiseOperand    Activation  an elementwise factor of an input gradient (g b, g / x,  mul, div, rdiv_scalar
//                                   g (1 - y^2)); small errors multiply every gradient       a, b; exp, sqrt, tanh,
//                                   before it                                                sigmoid y; log, pow x
//   LossOperand         Activation  a loss head's probabilities (gx = (P - q) / N) or        cross_entropy probs,
//                                   log-probabilities                                        log_softmax y
//   Mask                Mask        a 0/1 pattern, stored as 1 bit per element               relu, dropout,
//                                                                                            batch_norm_relu mask
//   Indices             Indices     argmax positions, gather indices, targets: kept exact    max pools, max,
//                                                                                            index_select, targets
//   Statistics          Statistics  small per-row/per-channel values (mean, rstd): exact     batch_norm, layer_norm
//   Parameter           Parameter   a weight or buffer held by reference: not copied, not    W, weight, running_*
//                                   counted, but version-checked
//
// Kinds (what the item *is*, save_kind(role)): Activation items are the large ones a policy may compress; the
// other kinds are kept exact by every policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/bitmask.h"
#include "core/sparse_samples.h"
#include "core/tensor.h"

namespace razor {

enum class SaveKind : uint8_t { Activation, Mask, Indices, Statistics, Parameter };
const char* save_kind_name(SaveKind kind);

// What a saved item is for (the table above). Adding a role: add it here, to save_kind() and save_role_name(),
// to the table, and a case to every policy's switch (RazorSavePolicy::decide); the compiler lists the switches.
enum class SaveRole : uint8_t {
    WeightGradOperand,
    InputGradOperand,
    BatchNormInput,
    LayerNormInput,
    GeluInput,
    PointwiseOperand,
    LossOperand,
    Mask,
    Indices,
    Statistics,
    Parameter,
};
const char* save_role_name(SaveRole role);   // "weight-grad-operand", ...

constexpr SaveKind save_kind(SaveRole role) {
    switch (role) {
        case SaveRole::WeightGradOperand:
        case SaveRole::InputGradOperand:
        case SaveRole::BatchNormInput:
        case SaveRole::LayerNormInput:
        case SaveRole::GeluInput:
        case SaveRole::PointwiseOperand:
        case SaveRole::LossOperand: return SaveKind::Activation;
        case SaveRole::Mask: return SaveKind::Mask;
        case SaveRole::Indices: return SaveKind::Indices;
        case SaveRole::Statistics: return SaveKind::Statistics;
        case SaveRole::Parameter: return SaveKind::Parameter;
    }
    return SaveKind::Activation;
}

// Where an item is saved. Policies decide on `role` (and may override per module path); `op` and `name` are for
// error messages and reports only.
struct SaveSite {
    std::string_view op;            // "conv2d"
    std::string_view module_path;   // "layer1.0.conv1" (empty outside modules)
    std::string_view name;          // "x"
    SaveRole role;
    SaveKind kind() const { return save_kind(role); }
};

// An 8-bit form with one affine map per channel, read in place (SavedTensor::channel_codes).
struct ChannelCodes {
    const float* qparams;   // (C, 2): lo_c, step_c
    const uint8_t* codes;   // (numel) in the tensor's (N, C, S) order: value = lo_c + step_c * code
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
    // For forms that store an (N, C, ...) tensor as one 8-bit code per element with an affine map per channel
    // (value = lo_c + step_c * code): the codes and maps, so a kernel that reads each element once (BatchNorm's
    // backward) works on them without a dense fp32 transient of the whole tensor. Empty for every other form.
    virtual std::optional<ChannelCodes> channel_codes() const { return std::nullopt; }
    // For forms that store each sample as a bitmap of kept elements plus their values (Back Razor's razored
    // tensors): that form, so a kernel can skip what was dropped instead of multiplying by unpacked zeros. Empty for
    // every other form.
    virtual std::optional<SparseSamples> sparse_samples() const { return std::nullopt; }

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

// A 0/1 mask at 1 bit per element. Unpacks to F32 0/1. razor's dense tape keeps masks in this form too.
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

// What an op tells the policy about an output it computed from an item it saved: y = relu(x * scale_c + shift_c)
// per channel c of x (N, C, ...), with x the item `input` (its stored form, as the policy packed it). BatchNorm
// followed by ReLU in training is such an op (core/ops/batch_norm.cpp: scale = w rstd, shift = b - mean scale).
struct ChannelAffineRelu {
    const SavedTensor* input = nullptr;   // the op's stored x; valid during note_output only
    const float* scale = nullptr;         // (C)
    const float* shift = nullptr;         // (C)
    int64_t channels = 0;
};

// Decides the stored form of each saved item. Implementations must be thread-compatible (const pack).
class SavePolicy {
public:
    virtual ~SavePolicy() = default;
    virtual std::string name() const = 0;
    virtual std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const = 0;
    // `y`, an op's output, is `how` a function of what that op saved. A policy may keep a later save of exactly
    // this y (same storage, offset, shape, strides and version) as that function of the op's stored form instead
    // of a copy of its own (Back Razor's derived conv inputs, sparse/channel_int8.h). The default ignores it: the
    // dense policy keeps y by reference anyway.
    virtual void note_output(const Tensor& y, const ChannelAffineRelu& how) const { (void)y, (void)how; }
};

// Every item dense (parameters by reference). razor's default, and PyTorch's.
class DenseSavePolicy final : public SavePolicy {
public:
    std::string name() const override { return "dense"; }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override;
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

class Tape;   // core/tape.h

// ---- the per-node context ----
class SavedContext {
public:
    SavedContext() = default;
    ~SavedContext() { release(); }
    SavedContext(const SavedContext&) = delete;
    SavedContext& operator=(const SavedContext&) = delete;

    // Called by the node that owns this context when it is recorded.
    void bind(std::string op, std::string module_path);

    // Items go to the tape current when the first one is saved (current_tape()), and are removed from that same
    // tape on release, from whichever thread and whenever that happens.
    void save(const std::string& name, const Tensor& t, SaveRole role);   // through the tape's save policy
    void save_mask(const std::string& name, BitMask bits, const Shape& shape);   // role Mask
    // After saving `input`: y = relu(input * scale_c + shift_c), for the policy (SavePolicy::note_output).
    void note_output(const Tensor& y, const std::string& input, const std::vector<float>& scale,
                     const std::vector<float>& shift);

    Tensor unpack(const std::string& name) const;       // dense transient
    const SavedTensor& saved(const std::string& name) const;
    const BitMask& mask(const std::string& name) const;
    bool has(const std::string& name) const;

    void release();                  // destroy every stored form; called right after the node's backward
    bool released() const { return released_; }

private:
    struct Item {
        std::string name;
        SaveRole role;
        std::unique_ptr<SavedTensor> stored;
        uint64_t record_id;
    };
    const Item& find(const std::string& name) const;
    // Records `stored` on the tape. `source`: the saved tensor's storage (null for a mask), whose bytes are the
    // item's dense-equivalent; a mask's dense-equivalent is its own bits.
    void add_item(const std::string& name, std::unique_ptr<SavedTensor> stored, SaveRole role,
                  const std::shared_ptr<Storage>& source);
    Tape& tape();   // the tape this context saves into (bound on the first save)

    std::string op_;
    std::string module_path_;
    std::shared_ptr<Tape> tape_;   // kept alive until release: records are removed from the tape they went to
    std::vector<Item> items_;
    bool released_ = false;
};

}  // namespace razor
