// sparse/razored_tensor.h -- a saved activation stored "razored": per-sample top-k, as bitmap + packed values.
//
// reference: the BackRazor_Neurips22 saved-tensor format (bitmap + values gathered by the mask), re-laid out for
// parallel CPU packing. docs: docs/back-razor.md "Layout".
//
// Dimension letters: x (B, ...) viewed as (B, n_s) (masker.h); W = ceil(n_s / 64) bitmap words per sample;
// count_b = values kept for sample b.
//
// Layout: ONE tracked buffer (a razor Storage), sections in this order (all but the last are multiples of 8 bytes,
// so every section is 8-byte aligned):
//
//   bitmap   (B, W) uint64    sample b's bits start at word b*W (64-bit aligned); bit i of sample b is bit i % 64
//                             of word b*W + i / 64 (LSB-first); set = a value is stored; padding bits are 0
//   offsets  (B + 1) int64    prefix sum of count_b: sample b's values are values[offsets[b] .. offsets[b + 1])
//   qparams  (B, 2) float     int8 only: per-sample (lo, step) of the affine code, value = lo + step * code
//   values   (offsets[B])     kept values of sample 0, then 1, ...; row-major inside a sample; as fp32, fp16 (RNE)
//                             or uint8 codes
//
// stored_bytes() is the buffer's size, exactly:
//   8 * B * W  +  8 * (B + 1)  +  (int8: 8 * B)  +  offsets[B] * b_v          (b_v = 4, 2, 1)
// i.e. the spec's ρ·n·b_v + n/8, plus at most 8 bytes of bitmap padding per sample, plus the offsets.
//
// int8 values (a razor choice; the reference's Mesa quantiser differs -- see docs/back-razor.md "Deviations"):
// per-sample affine over the KEPT values, lo = min, step = (max - min) / 255, code = clamp(round((v - lo) / step),
// 0, 255), round to nearest even, no EMA state, no stochastic rounding. |error| <= step / 2 (plus fp32 rounding).
//
// A razored copy is a snapshot taken at save time: writing into x in place afterwards does not affect it (so no
// version check is needed, unlike a dense reference).
//
// The payload is shared_ptr-owned so that several saves of the same tensor (q/k/v reading one LN output) can share
// one copy; shared_storage() lets the tape count it once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/saved.h"
#include "sparse/masker.h"

namespace razor::sparse {

enum class ValueCodec : uint8_t { F32, F16, I8 };
const char* value_codec_name(ValueCodec codec);   // "f32", "f16", "i8"
int64_t value_codec_bytes(ValueCodec codec);      // 4, 2, 1

struct RazorPackOptions {
    double ratio = 0.9;                    // r: fraction dropped per sample, in [0, 1]
    ValueCodec values = ValueCodec::F32;
    TieMode ties = TieMode::Razor;
    Isa isa = active_isa();                // the masker's kernel family (core/isa.h; tests run each one)
};

class RazoredTensor final : public SavedTensor {
public:
    // Selects and packs x (any shape, f32; dim 0 is the batch, a 0-d tensor is one sample of one element).
    // x itself is not modified or kept.
    static std::unique_ptr<RazoredTensor> pack(const Tensor& x, const RazorPackOptions& options);

    // A second handle on the same payload (shared storage; counted once by the tape).
    std::unique_ptr<RazoredTensor> share() const;
    // The payload as an opaque handle (dedup caches keep a weak_ptr to it), and a tensor rebuilt from one.
    std::shared_ptr<const void> payload_handle() const { return payload_; }
    static std::unique_ptr<RazoredTensor> from_payload(const std::shared_ptr<const void>& handle, Shape shape);

    Tensor unpack() const override;                 // dense f32, zeros where nothing is stored
    void unpack_into(float* dst) const;             // the same into a caller's buffer of numel() floats
    bool has_row_unpack() const override { return true; }
    void unpack_rows(int64_t first, int64_t count, float* dst) const override;   // samples [first, first + count)
    int64_t stored_bytes() const override;
    std::string format() const override;            // "bitmap+f16 r=0.90" (+ " ties=reference")
    const Storage* shared_storage() const override { return payload_->storage.get(); }
    std::optional<SparseSamples> sparse_samples() const override;   // the layout above, read in place

    // ---- the compressed form, for kernels that consume it directly ----
    double ratio() const { return payload_->options.ratio; }
    ValueCodec value_codec() const { return payload_->options.values; }
    TieMode tie_mode() const { return payload_->options.ties; }
    int64_t batch() const { return payload_->B; }                    // B
    int64_t sample_numel() const { return payload_->n_s; }           // n_s
    int64_t words_per_sample() const { return payload_->W; }         // W
    int64_t keep_target() const { return payload_->c; }              // c = keep_count(n_s, r)
    const uint64_t* bitmap() const;                                  // (B, W)
    const int64_t* offsets() const;                                  // (B + 1)
    const float* qparams() const;                                    // (B, 2) (lo, step); int8 only, else null
    const void* values() const;                                      // (offsets[B]) of the codec's type
    const float* values_f32() const;                                 // null unless F32
    const uint16_t* values_f16() const;                              // null unless F16 (IEEE half bits)
    const uint8_t* values_i8() const;                                // null unless I8 (codes)
    int64_t kept(int64_t b) const { return offsets()[b + 1] - offsets()[b]; }
    int64_t total_kept() const { return offsets()[batch()]; }

    // Exact size of the layout above for B samples of n_s elements with `total_kept` values.
    static int64_t layout_bytes(int64_t B, int64_t n_s, int64_t total_kept, ValueCodec codec);

private:
    struct Payload {
        std::shared_ptr<Storage> storage;
        RazorPackOptions options;
        int64_t B = 0, n_s = 0, W = 0, c = 0;
    };
    RazoredTensor(Shape shape, std::shared_ptr<const Payload> payload);
    void unpack_sample(int64_t b, float* out) const;
    std::shared_ptr<const Payload> payload_;
};

// int8 affine parameters of a set of values (what RazoredTensor and DenseCodedTensor use): lo = min, step =
// (max - min) / 255 (0 when all values are equal).
void affine_u8_params(const float* v, int64_t n, float& lo, float& step);
// Widens [mn, mx] to cover v[0, n), as std::min / std::max over it would (a NaN in v leaves them as they are).
void extend_range(const float* v, int64_t n, float& mn, float& mx);
void quantize_u8(const float* v, int64_t n, float lo, float step, uint8_t* codes);
inline float dequantize_u8(uint8_t code, float lo, float step) { return lo + step * static_cast<float>(code); }

}  // namespace razor::sparse
