// sparse/dense_coded.cpp -- dense fp16 / int8 saved tensors (see the header).
#include "sparse/dense_coded.h"

#include "core/check.h"
#include "sparse/fp16.h"

namespace razor::sparse {

namespace {
constexpr int64_t kChunk = 1 << 14;   // elements per parallel chunk of the fp16 conversions
}

std::unique_ptr<DenseCodedTensor> DenseCodedTensor::pack(const Tensor& x_in, ValueCodec codec, bool portable) {
    if (x_in.dtype() != DType::F32)
        throw Error(fmt("DenseCodedTensor::pack: expected an f32 tensor, got ", dtype_name(x_in.dtype()),
                        "; hint: only float activations are coded"));
    if (codec == ValueCodec::F32)
        throw Error("DenseCodedTensor::pack: codec f32 is not a coded form; hint: save it dense (DenseSaved)");
    const Tensor x = x_in.contiguous();
    const int64_t n = x.numel();
    const int64_t B = x.dim() == 0 ? 1 : x.size(0);
    const int64_t n_s = B > 0 ? n / B : 0;
    const float* px = x.f32();
    std::shared_ptr<Storage> storage;
    if (codec == ValueCodec::F16) {
        storage = std::make_shared<Storage>(static_cast<size_t>(2 * n));
        uint16_t* dst = static_cast<uint16_t*>(storage->data);
        const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (int64_t k = 0; k < chunks; ++k) {
            const int64_t begin = k * kChunk, end = std::min(n, begin + kChunk);
            floats_to_halves(px + begin, dst + begin, end - begin, portable);
        }
    } else {
        storage = std::make_shared<Storage>(static_cast<size_t>(n + 8 * B));
        float* qp = static_cast<float*>(storage->data);                          // (B, 2)
        uint8_t* codes = static_cast<uint8_t*>(storage->data) + 8 * B;            // (n)
#pragma omp parallel for schedule(static) if (B > 1 && n > kChunk)
        for (int64_t b = 0; b < B; ++b) {
            float lo = 0.f, step = 0.f;
            affine_u8_params(px + b * n_s, n_s, lo, step);
            quantize_u8(px + b * n_s, n_s, lo, step, codes + b * n_s);
            qp[2 * b] = lo, qp[2 * b + 1] = step;
        }
    }
    return std::unique_ptr<DenseCodedTensor>(new DenseCodedTensor(x.shape(), codec, B, n_s, std::move(storage)));
}

std::unique_ptr<DenseCodedTensor> DenseCodedTensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape,
                                                                  ValueCodec codec) {
    const int64_t n = shape_numel(shape);
    const int64_t B = shape.empty() ? 1 : shape[0];
    return std::unique_ptr<DenseCodedTensor>(
        new DenseCodedTensor(shape, codec, B, B > 0 ? n / B : 0, std::move(storage)));
}

const uint16_t* DenseCodedTensor::values_f16() const {
    return codec_ == ValueCodec::F16 ? static_cast<const uint16_t*>(storage_->data) : nullptr;
}
const float* DenseCodedTensor::qparams() const {
    return codec_ == ValueCodec::I8 ? static_cast<const float*>(storage_->data) : nullptr;
}
const uint8_t* DenseCodedTensor::values_i8() const {
    return codec_ == ValueCodec::I8 ? static_cast<const uint8_t*>(storage_->data) + 8 * B_ : nullptr;
}

std::string DenseCodedTensor::format() const { return std::string("dense+") + value_codec_name(codec_); }

void DenseCodedTensor::unpack_into(float* dst) const {
    const int64_t n = B_ * n_s_;
    if (codec_ == ValueCodec::F16) {
        const uint16_t* src = values_f16();
        const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (int64_t k = 0; k < chunks; ++k) {
            const int64_t begin = k * kChunk, end = std::min(n, begin + kChunk);
            halves_to_floats(src + begin, dst + begin, end - begin);
        }
        return;
    }
    const float* qp = qparams();
    const uint8_t* codes = values_i8();
#pragma omp parallel for schedule(static) if (B_ > 1 && n > kChunk)
    for (int64_t b = 0; b < B_; ++b)
        for (int64_t i = 0; i < n_s_; ++i)
            dst[b * n_s_ + i] = dequantize_u8(codes[b * n_s_ + i], qp[2 * b], qp[2 * b + 1]);
}

// Serial (SavedTensor::unpack_rows): callers run it inside their own parallel loops.
void DenseCodedTensor::unpack_rows(int64_t first, int64_t count, float* dst) const {
    RAZOR_CHECK(first >= 0 && count >= 0 && first + count <= B_)
        << "DenseCodedTensor::unpack_rows: samples [" << first << ", " << first + count << ") of " << B_;
    const int64_t begin = first * n_s_, n = count * n_s_;
    if (codec_ == ValueCodec::F16) {
        halves_to_floats(values_f16() + begin, dst, n);
        return;
    }
    const float* qp = qparams();
    const uint8_t* codes = values_i8() + begin;
    for (int64_t b = 0; b < count; ++b)
        for (int64_t i = 0; i < n_s_; ++i)
            dst[b * n_s_ + i] = dequantize_u8(codes[b * n_s_ + i], qp[2 * (first + b)], qp[2 * (first + b) + 1]);
}

Tensor DenseCodedTensor::unpack() const {
    Tensor t = Tensor::empty(shape());
    if (t.numel() > 0) unpack_into(t.f32());
    return t;
}

}  // namespace razor::sparse
