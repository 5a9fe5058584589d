// core/tensor.h -- razor's N-d tensor: shared storage, shape + strides, autograd metadata.
//
// reference: torch.Tensor (a small subset). docs: docs/architecture.md "core".
//
// Model:
//   Storage     one tracked, 64-byte-aligned buffer plus a version counter. Views share it. Any in-place write
//               bumps the version, so the tape can tell when a tensor it saved was modified (autograd.h).
//   TensorImpl  (storage, offset, shape, strides, dtype) + autograd fields: requires_grad, grad (leaves),
//               grad_fn (the Node that produced it).
//   Tensor      a cheap handle (shared_ptr to TensorImpl). Copying a Tensor aliases; use clone() to copy data.
//
// Layout: row-major. Most kernels want contiguous input and call contiguous(), which returns the tensor itself
// when it already is. Views (reshape of a contiguous tensor, transpose, permute, slice) only change shape,
// strides and offset.
//
// dtypes: F32 for all math; I64 for labels and index lists; U8 for raw image bytes. Ops reject the wrong dtype
// with an error naming the op.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace razor {

enum class DType : uint8_t { F32, I64, U8 };
size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);   // "(128, 3, 32, 32)"
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

// One tracked buffer. `version` counts in-place writes (see Tensor::bump_version).
struct Storage {
    explicit Storage(size_t bytes);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    void* data = nullptr;
    size_t bytes = 0;
    uint64_t version = 0;
};

class Node;
struct TensorImpl;

class Tensor {
public:
    Tensor() = default;
    explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

    // ---- factories (no autograd history; requires_grad false) ----
    static Tensor empty(const Shape& shape, DType dtype = DType::F32);   // uninitialised
    static Tensor zeros(const Shape& shape, DType dtype = DType::F32);
    static Tensor ones(const Shape& shape);
    static Tensor full(const Shape& shape, float value);
    static Tensor from_vector(const Shape& shape, const std::vector<float>& values);
    static Tensor from_vector_i64(const Shape& shape, const std::vector<int64_t>& values);
    static Tensor scalar(float value) { return full({}, value); }
    static Tensor arange(int64_t n);                                     // 0, 1, ..., n-1 as F32
    static Tensor randn(const Shape& shape, class Generator& gen);       // N(0, 1)
    static Tensor rand(const Shape& shape, class Generator& gen);        // U[0, 1)
    static Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype()); }
    static Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }

    // ---- metadata ----
    bool defined() const { return impl_ != nullptr; }
    const Shape& shape() const;
    const Shape& strides() const;
    int64_t dim() const { return static_cast<int64_t>(shape().size()); }
    int64_t size(int64_t d) const;          // negative d counts from the end
    int64_t numel() const;
    DType dtype() const;
    int64_t offset() const;                 // in elements, into the storage
    bool is_contiguous() const;
    size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
    const std::shared_ptr<Storage>& storage() const;
    bool same_storage(const Tensor& other) const { return storage() == other.storage(); }

    // Pointer to element 0 of this view (offset applied). Checks the dtype; does not check contiguity.
    template <class T>
    T* data() const;
    float* f32() const { return data<float>(); }
    int64_t* i64() const { return data<int64_t>(); }

    // ---- copies and views that are not ops (no autograd history) ----
    Tensor contiguous() const;      // itself if contiguous, else a packed copy (keeps the autograd link: see ops)
    Tensor clone() const;           // a packed copy with no history
    Tensor detach() const;          // same storage, no history
    Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;  // raw view, no history
    float item() const;             // the value of a one-element tensor
    std::vector<float> to_vector() const;           // F32 values in logical (row-major) order
    std::vector<int64_t> to_vector_i64() const;

    // ---- in-place writes (bump the version; refused on leaves that require grad while grad mode is on) ----
    Tensor& fill_(float value);
    Tensor& zero_() { return fill_(0.f); }
    Tensor& copy_(const Tensor& src);                  // same numel, src packed in logical order
    Tensor& add_(const Tensor& other, float alpha = 1.f);   // this += alpha * other (same shape)
    Tensor& mul_(float factor);
    void bump_version() const;
    uint64_t version() const;

    // ---- autograd ----
    bool requires_grad() const;
    Tensor& requires_grad_(bool value = true);       // only on leaves
    bool is_leaf() const;
    Tensor grad() const;                             // accumulated gradient of a leaf (undefined until backward)
    void set_grad(const Tensor& grad) const;
    void zero_grad() const;                          // drops the gradient (PyTorch's set_to_none=True)
    const std::shared_ptr<Node>& grad_fn() const;
    void set_grad_fn(std::shared_ptr<Node> node) const;   // used by ops when they record a node
    // Reverse-mode from this tensor. Without `gradient` the tensor must hold one element (the loss).
    // retain_graph=false frees every node's saved state right after its backward.
    void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
    // PyTorch's register_post_accumulate_grad_hook, on a leaf that requires grad: `hook(leaf)` runs once per
    // backward, after the last gradient this backward sends the leaf has been added to leaf.grad(). The hook may
    // read, use and drop the gradient (zero_grad()): an optimizer steps there to free each gradient as soon as it
    // is complete (optim/step_in_backward.h). Returns an id for remove_post_accumulate_grad_hook.
    uint64_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
    void remove_post_accumulate_grad_hook(uint64_t id) const;   // an unknown id is ignored

    // Optional name (parameters get their state_dict key); used in error messages.
    const std::string& name() const;
    Tensor& set_name(std::string name);

    // True when this handle is the only one on its TensorImpl, the TensorImpl the only one on its storage (no view,
    // no dense save on the tape), and it covers that storage whole and contiguously. An op given such a tensor as
    // an rvalue (the caller is done with it: a temporary, or std::move) may write its result into the storage
    // instead of allocating another (add_relu(Tensor&&, ...), batch_norm(Tensor&&, ...)).
    bool sole_owner() const;

    const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
    std::string to_string(int64_t max_elements = 8) const;   // "Tensor(2, 3) f32 [0.1, ...]"

private:
    std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
    std::shared_ptr<Storage> storage;
    int64_t offset = 0;
    Shape shape;
    Shape strides;
    DType dtype = DType::F32;
    bool requires_grad = false;
    std::shared_ptr<TensorImpl> grad;
    std::shared_ptr<Node> grad_fn;
    std::string name;
    struct GradHook {
        uint64_t id;
        std::function<void(const Tensor&)> fn;
    };
    std::vector<GradHook> post_accumulate_grad_hooks;   // leaves only (Tensor::register_post_accumulate_grad_hook)
    uint64_t next_hook_id = 0;
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::F32; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <>
constexpr DType dtype_of<uint8_t>() { return DType::U8; }

void throw_dtype_mismatch(DType expected, DType got);
void throw_undefined_tensor();

template <class T>
T* Tensor::data() const {
    if (!impl_) throw_undefined_tensor();
    if (impl_->dtype != dtype_of<T>()) throw_dtype_mismatch(dtype_of<T>(), impl_->dtype);
    return static_cast<T*>(impl_->storage->data) + impl_->offset;
}

// Normalises a possibly negative dimension index; throws naming `op` when out of range.
int64_t wrap_dim(int64_t d, int64_t ndim, const char* op);

}  // namespace razor
