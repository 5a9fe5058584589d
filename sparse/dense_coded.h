// sparse/dense_coded.h -- a saved activation stored dense but in fewer bits: fp16, or per-sample int8.
//
// reference: the BackRazor_Neurips22 ViT's GELU, which saves its input dense in half precision (x.half()).
// docs: docs/back-razor.md "GELU input".
//
// Dimension letters: x (B, ...) viewed as (B, n_s), as the masker.
//
// Layout (one tracked buffer, stored_bytes() = its size exactly):
//   F16  values (n) fp16 bits, round to nearest even                       2 n bytes
//   I8   qparams (B, 2) float (lo, step) per sample, then codes (n) uint8   n + 8 B bytes
//        lo = min, step = (max - min) / 255 over the sample; code = clamp(round((v - lo) / step), 0, 255);
//        |error| <= step / 2. A razor codec (the reference has no dense int8 save): label results as such.
// unpack() widens to dense fp32; all backward arithmetic stays fp32.
#pragma once

#include <memory>
#include <string>

#include "core/saved.h"
#include "sparse/razored_tensor.h"

namespace razor::sparse {

class DenseCodedTensor final : public SavedTensor {
public:
    // codec F16 or I8 (F32 is DenseSaved: a reference, no copy).
    static std::unique_ptr<DenseCodedTensor> pack(const Tensor& x, ValueCodec codec, bool portable = false);
    // Another handle on a packed copy's buffer (the save policy's deduplication: one copy, counted once).
    std::shared_ptr<Storage> storage_handle() const { return storage_; }
    static std::unique_ptr<DenseCodedTensor> from_storage(std::shared_ptr<Storage> storage, const Shape& shape,
                                                          ValueCodec codec);

    Tensor unpack() const override;
    void unpack_into(float* dst) const;
    bool has_row_unpack() const override { return true; }   // every sample is coded on its own
    void unpack_rows(int64_t first, int64_t count, float* dst) const override;
    int64_t stored_bytes() const override { return static_cast<int64_t>(storage_->bytes); }
    std::string format() const override;   // "dense+f16", "dense+i8"
    const Storage* shared_storage() const override { return storage_.get(); }

    ValueCodec value_codec() const { return codec_; }
    int64_t batch() const { return B_; }
    int64_t sample_numel() const { return n_s_; }
    const uint16_t* values_f16() const;   // (n) or null
    const float* qparams() const;         // (B, 2) or null
    const uint8_t* values_i8() const;     // (n) or null

private:
    DenseCodedTensor(Shape shape, ValueCodec codec, int64_t B, int64_t n_s, std::shared_ptr<Storage> storage)
        : SavedTensor(std::move(shape), DType::F32), codec_(codec), B_(B), n_s_(n_s), storage_(std::move(storage)) {}
    ValueCodec codec_;
    int64_t B_, n_s_;
    std::shared_ptr<Storage> storage_;
};

}  // namespace razor::sparse
