// core/tensor.cpp -- Tensor storage, factories, copies and in-place writes (see tensor.h).
#include "core/tensor.h"

#include <cstring>
#include <sstream>

#include "core/allocator.h"
#include "core/autograd.h"
#include "core/check.h"
#include "core/rng.h"

namespace razor {

size_t dtype_size(DType dtype) {
    switch (dtype) {
        case DType::F32: return 4;
        case DType::I64: return 8;
        case DType::U8: return 1;
    }
    return 0;
}

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DType::F32: return "f32";
        case DType::I64: return "i64";
        case DType::U8: return "u8";
    }
    return "?";
}

std::string shape_str(const Shape& shape) {
    std::ostringstream os;
    os << "(";
    for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    os << ")";
    return os.str();
}

int64_t shape_numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

Shape contiguous_strides(const Shape& shape) {
    Shape strides(shape.size());
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= shape[i];
    }
    return strides;
}

int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
    if (d < -ndim || d >= ndim || ndim == 0)
        throw Error(fmt(op, ": dimension ", d, " is out of range for a tensor with ", ndim,
                        " dimensions; hint: valid dims are ", -ndim, "..", ndim - 1));
    return d < 0 ? d + ndim : d;
}

void throw_dtype_mismatch(DType expected, DType got) {
    throw Error(fmt("tensor dtype: expected ", dtype_name(expected), ", got ", dtype_name(got),
                    "; hint: labels and indices are i64, everything else f32"));
}

void throw_undefined_tensor() { throw Error("use of an undefined (empty) Tensor; hint: was it initialised?"); }

Storage::Storage(size_t nbytes) : data(tracked_alloc(nbytes)), bytes(nbytes) {}
Storage::~Storage() { tracked_free(data, bytes); }

// ---------------------------------------------------------------- factories

Tensor Tensor::empty(const Shape& shape, DType dtype) {
    for (int64_t s : shape)
        if (s < 0) throw Error(fmt("Tensor::empty: negative dimension in shape ", shape_str(shape)));
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype));
    impl->shape = shape;
    impl->strides = contiguous_strides(shape);
    impl->dtype = dtype;
    return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    std::memset(t.impl_->storage->data, 0, t.impl_->storage->bytes);
    return t;
}

Tensor Tensor::ones(const Shape& shape) { return full(shape, 1.f); }

Tensor Tensor::full(const Shape& shape, float value) {
    Tensor t = empty(shape);
    float* p = t.f32();
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = value;
    return t;
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values) {
    if (shape_numel(shape) != static_cast<int64_t>(values.size()))
        throw Error(fmt("Tensor::from_vector: shape ", shape_str(shape), " holds ", shape_numel(shape),
                        " elements, got ", values.size(), " values"));
    Tensor t = empty(shape);
    if (!values.empty()) std::memcpy(t.f32(), values.data(), values.size() * sizeof(float));
    return t;
}

Tensor Tensor::from_vector_i64(const Shape& shape, const std::vector<int64_t>& values) {
    if (shape_numel(shape) != static_cast<int64_t>(values.size()))
        throw Error(fmt("Tensor::from_vector_i64: shape ", shape_str(shape), " holds ", shape_numel(shape),
                        " elements, got ", values.size(), " values"));
    Tensor t = empty(shape, DType::I64);
    if (!values.empty()) std::memcpy(t.i64(), values.data(), values.size() * sizeof(int64_t));
    return t;
}

Tensor Tensor::arange(int64_t n) {
    Tensor t = empty({n});
    for (int64_t i = 0; i < n; ++i) t.f32()[i] = static_cast<float>(i);
    return t;
}

Tensor Tensor::randn(const Shape& shape, Generator& gen) {
    Tensor t = empty(shape);
    float* p = t.f32();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = gen.normal();
    return t;
}

Tensor Tensor::rand(const Shape& shape, Generator& gen) {
    Tensor t = empty(shape);
    float* p = t.f32();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = gen.uniform();
    return t;
}

// ---------------------------------------------------------------- metadata

static TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
    if (!impl) throw_undefined_tensor();
    return *impl;
}

const Shape& Tensor::shape() const { return checked(impl_).shape; }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
DType Tensor::dtype() const { return checked(impl_).dtype; }
int64_t Tensor::offset() const { return checked(impl_).offset; }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked(impl_).storage; }
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "Tensor::size")]; }

// Row-major packed (size-1 dims may have any stride).
static bool packed_layout(const TensorImpl& t) {
    int64_t expected = 1;
    for (size_t i = t.shape.size(); i-- > 0;) {
        if (t.shape[i] == 1) continue;
        if (t.strides[i] != expected) return false;
        expected *= t.shape[i];
    }
    return true;
}

bool Tensor::is_contiguous() const { return packed_layout(checked(impl_)); }

// ---------------------------------------------------------------- copies and views

// Copies the logical elements of `src` (any strides) into packed `dst`, element size `esize`.
static void gather_strided(const TensorImpl& src, char* dst, size_t esize) {
    const int64_t n = shape_numel(src.shape);
    const int64_t ndim = static_cast<int64_t>(src.shape.size());
    const char* base = static_cast<const char*>(src.storage->data) + src.offset * esize;
    if (ndim == 0) {
        std::memcpy(dst, base, esize);
        return;
    }
    if (packed_layout(src)) {   // one flat copy, in a few large pieces (rows of 8-32 floats made it slow)
        const size_t bytes = static_cast<size_t>(n) * esize;
        const int64_t pieces = bytes > (size_t{1} << 20) ? 8 : 1;
#pragma omp parallel for schedule(static) if (pieces > 1)
        for (int64_t p = 0; p < pieces; ++p) {
            const size_t lo = bytes * p / pieces / 64 * 64, hi = p + 1 == pieces ? bytes : bytes * (p + 1) / pieces / 64 * 64;
            std::memcpy(dst + lo, base + lo, hi - lo);
        }
        return;
    }
    // Walk the outer dims with an index vector; copy the innermost dim in a loop.
    const int64_t inner = src.shape[ndim - 1];
    const int64_t inner_stride = src.strides[ndim - 1];
    const int64_t outer = inner ? n / inner : 0;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t o = 0; o < outer; ++o) {
        int64_t rem = o, off = 0;
        for (int64_t d = ndim - 2; d >= 0; --d) {
            off += (rem % src.shape[d]) * src.strides[d];
            rem /= src.shape[d];
        }
        char* out = dst + o * inner * esize;
        if (inner_stride == 1) {
            std::memcpy(out, base + off * esize, inner * esize);
        } else {
            for (int64_t i = 0; i < inner; ++i)
                std::memcpy(out + i * esize, base + (off + i * inner_stride) * esize, esize);
        }
    }
}

Tensor Tensor::clone() const {
    const TensorImpl& t = checked(impl_);
    Tensor out = empty(t.shape, t.dtype);
    gather_strided(t, static_cast<char*>(out.impl_->storage->data), dtype_size(t.dtype));
    return out;
}

Tensor Tensor::contiguous() const {
    if (is_contiguous()) return *this;
    // Keeps the autograd link: the copy is a differentiable identity (grad flows back unchanged in shape).
    Tensor out = clone();
    if (requires_grad() && grad_enabled()) {
        struct ContiguousBackward final : Node {
            std::vector<Tensor> backward(const Tensor& g) override { return {g}; }
        };
        record<ContiguousBackward>("contiguous", {*this}, out);
    }
    return out;
}

Tensor Tensor::detach() const {
    const TensorImpl& t = checked(impl_);
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = t.storage;
    impl->offset = t.offset;
    impl->shape = t.shape;
    impl->strides = t.strides;
    impl->dtype = t.dtype;
    impl->name = t.name;
    return Tensor(std::move(impl));
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
    Tensor view = detach();
    view.impl_->shape = shape;
    view.impl_->strides = strides;
    view.impl_->offset = offset;
    return view;
}

float Tensor::item() const {
    if (numel() != 1)
        throw Error(fmt("item(): expected a one-element tensor, got shape ", shape_str(shape())));
    if (dtype() == DType::I64) return static_cast<float>(*i64());
    return *f32();
}

std::vector<float> Tensor::to_vector() const {
    Tensor c = contiguous();
    const float* p = c.f32();
    return std::vector<float>(p, p + c.numel());
}

std::vector<int64_t> Tensor::to_vector_i64() const {
    Tensor c = contiguous();
    const int64_t* p = c.i64();
    return std::vector<int64_t>(p, p + c.numel());
}

// ---------------------------------------------------------------- in-place writes

static void check_inplace_allowed(const Tensor& t, const char* op) {
    if (t.requires_grad() && t.is_leaf() && grad_enabled())
        throw Error(fmt(op, ": in-place write into a leaf that requires grad (", t.name().empty() ? "unnamed" : t.name(),
                        ") while grad mode is on; hint: wrap the update in NoGradGuard, as optimizers do"));
}

Tensor& Tensor::fill_(float value) {
    check_inplace_allowed(*this, "fill_");
    RAZOR_CHECK(is_contiguous()) << "fill_ on a non-contiguous view";
    float* p = f32();
    const int64_t n = numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] = value;
    bump_version();
    return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
    check_inplace_allowed(*this, "copy_");
    if (src.numel() != numel() || src.dtype() != dtype())
        throw Error(fmt("copy_: expected a source of ", numel(), " ", dtype_name(dtype()), " elements ",
                        shape_str(shape()), ", got ", shape_str(src.shape()), " ", dtype_name(src.dtype())));
    RAZOR_CHECK(is_contiguous()) << "copy_ into a non-contiguous view";
    gather_strided(*src.impl_, static_cast<char*>(impl_->storage->data) + impl_->offset * dtype_size(dtype()),
                   dtype_size(dtype()));
    bump_version();
    return *this;
}

Tensor& Tensor::add_(const Tensor& other, float alpha) {
    check_inplace_allowed(*this, "add_");
    if (other.shape() != shape())
        throw Error(fmt("add_: expected ", shape_str(shape()), ", got ", shape_str(other.shape())));
    RAZOR_CHECK(is_contiguous()) << "add_ into a non-contiguous view";
    Tensor o = other.contiguous();
    float* p = f32();
    const float* q = o.f32();
    const int64_t n = numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] += alpha * q[i];
    bump_version();
    return *this;
}

Tensor& Tensor::mul_(float factor) {
    check_inplace_allowed(*this, "mul_");
    RAZOR_CHECK(is_contiguous()) << "mul_ on a non-contiguous view";
    float* p = f32();
    const int64_t n = numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] *= factor;
    bump_version();
    return *this;
}

void Tensor::bump_version() const { ++storage()->version; }
uint64_t Tensor::version() const { return storage()->version; }

// ---------------------------------------------------------------- autograd fields

bool Tensor::requires_grad() const { return checked(impl_).requires_grad; }

Tensor& Tensor::requires_grad_(bool value) {
    if (!is_leaf())
        throw Error("requires_grad_(): only leaf tensors can change requires_grad; hint: use detach() first");
    if (value && dtype() != DType::F32)
        throw Error(fmt("requires_grad_(): only f32 tensors can require gradients, got ", dtype_name(dtype())));
    impl_->requires_grad = value;
    return *this;
}

bool Tensor::is_leaf() const { return checked(impl_).grad_fn == nullptr; }
Tensor Tensor::grad() const { return Tensor(checked(impl_).grad); }
void Tensor::set_grad(const Tensor& grad) const { checked(impl_).grad = grad.impl(); }
void Tensor::zero_grad() const { checked(impl_).grad.reset(); }
const std::shared_ptr<Node>& Tensor::grad_fn() const { return checked(impl_).grad_fn; }

void Tensor::set_grad_fn(std::shared_ptr<Node> node) const {
    TensorImpl& t = checked(impl_);
    t.grad_fn = std::move(node);
    t.requires_grad = t.grad_fn != nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
    run_backward(*this, gradient, retain_graph);
}

bool Tensor::sole_owner() const {
    return impl_ && impl_.use_count() == 1 && impl_->storage && impl_->storage.use_count() == 1 && offset() == 0 &&
           is_contiguous() && nbytes() == impl_->storage->bytes;
}

uint64_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
    TensorImpl& t = checked(impl_);
    if (!t.requires_grad || t.grad_fn)
        throw Error(fmt("register_post_accumulate_grad_hook: '", t.name.empty() ? "the tensor" : t.name,
                        "' is ", t.grad_fn ? "not a leaf" : "a leaf that does not require grad",
                        "; hint: register it on a parameter (a leaf with requires_grad_())"));
    const uint64_t id = t.next_hook_id++;
    t.post_accumulate_grad_hooks.push_back({id, std::move(hook)});
    return id;
}

void Tensor::remove_post_accumulate_grad_hook(uint64_t id) const {
    auto& hooks = checked(impl_).post_accumulate_grad_hooks;
    std::erase_if(hooks, [id](const TensorImpl::GradHook& h) { return h.id == id; });
}

const std::string& Tensor::name() const { return checked(impl_).name; }
Tensor& Tensor::set_name(std::string name) {
    checked(impl_).name = std::move(name);
    return *this;
}

std::string Tensor::to_string(int64_t max_elements) const {
    if (!impl_) return "Tensor(undefined)";
    std::ostringstream os;
    os << "Tensor" << shape_str(shape()) << " " << dtype_name(dtype()) << " [";
    Tensor c = contiguous();
    const int64_t n = c.numel();
    for (int64_t i = 0; i < n && i < max_elements; ++i) {
        if (i) os << ", ";
        if (dtype() == DType::F32) os << c.f32()[i];
        else if (dtype() == DType::I64) os << c.i64()[i];
        else os << static_cast<int>(c.data<uint8_t>()[i]);
    }
    if (n > max_elements) os << ", ...";
    os << "]";
    return os.str();
}

}  // namespace razor
