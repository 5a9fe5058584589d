// sparse/razored_tensor.cpp -- pack (select + compress per sample, OpenMP over samples) and unpack (see the header).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() through masked operations, which -Wmaybe-uninitialized
// reports at every use (a known false positive). Set before any include so it also covers the intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "sparse/razored_tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "sparse/fp16.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define RAZOR_UNPACK_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__)
#define RAZOR_UNPACK_AVX2 1   // extend_range only; unpack's scatter stays portable (a zero fill and a bit walk)
#include <immintrin.h>
#endif

namespace razor::sparse {

namespace {

constexpr int64_t kParallelElements = 1 << 15;   // below this, one thread packs the whole tensor

// Byte offsets of the sections in the payload buffer.
struct Sections {
    int64_t bitmap = 0, offsets = 0, qparams = 0, values = 0, end = 0;
};
Sections sections(int64_t B, int64_t W, int64_t total_kept, ValueCodec codec) {
    Sections s;
    s.bitmap = 0;
    s.offsets = s.bitmap + 8 * B * W;
    s.qparams = s.offsets + 8 * (B + 1);
    s.values = s.qparams + (codec == ValueCodec::I8 ? 8 * B : 0);
    s.end = s.values + total_kept * value_codec_bytes(codec);
    return s;
}

template <class T>
T* at(const std::shared_ptr<Storage>& storage, int64_t byte_offset) {
    return reinterpret_cast<T*>(static_cast<char*>(storage->data) + byte_offset);
}

// The batch view of a shape: dim 0 is the batch; a 0-d tensor is one sample of one element.
void batch_view(const Shape& shape, int64_t& B, int64_t& n_s) {
    if (shape.empty()) {
        B = 1, n_s = 1;
        return;
    }
    B = shape[0];
    n_s = shape_numel(Shape(shape.begin() + 1, shape.end()));
}

// Scatters one sample's kept values into dst (n_s floats) under its bitmap; zeros elsewhere. `load16(j, cnt)`
// returns values j .. j+cnt-1 as the low lanes of an AVX-512 register; `load1(j)` returns value j as a float.
template <class Load16, class Load1>
void scatter_values(const uint64_t* bits, int64_t n_s, float* dst, Load16 load16, Load1 load1) {
    int64_t j = 0;
    const int64_t words = (n_s + 63) / 64;
#if RAZOR_UNPACK_AVX512
    (void)load1;
    for (int64_t w = 0; w < words; ++w) {
        const uint64_t word = bits[w];
        for (int64_t q = 0; q < 64 && w * 64 + q < n_s; q += 16) {
            const int64_t base = w * 64 + q, remaining = n_s - base;
            const __mmask16 m = static_cast<__mmask16>(word >> q);
            const int cnt = std::popcount(static_cast<unsigned>(m));
            const __mmask16 valid =
                remaining >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << remaining) - 1);
            _mm512_mask_storeu_ps(dst + base, valid, _mm512_maskz_expand_ps(m, load16(j, cnt)));
            j += cnt;
        }
    }
#else
    (void)load16;
    std::fill(dst, dst + n_s, 0.f);
    for (int64_t w = 0; w < words; ++w)
        for (uint64_t word = bits[w]; word; word &= word - 1) dst[w * 64 + std::countr_zero(word)] = load1(j++);
#endif
}

void scatter_f32(const uint64_t* bits, int64_t n_s, const float* values, float* dst) {
    scatter_values(
        bits, n_s, dst,
        [values]([[maybe_unused]] int64_t j, [[maybe_unused]] int cnt) {
#if RAZOR_UNPACK_AVX512
            return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << cnt) - 1), values + j);
#else
            return 0;
#endif
        },
        [values](int64_t j) { return values[j]; });
}

void scatter_f16(const uint64_t* bits, int64_t n_s, const uint16_t* values, float* dst) {
    scatter_values(
        bits, n_s, dst,
        [values]([[maybe_unused]] int64_t j, [[maybe_unused]] int cnt) {
#if RAZOR_UNPACK_AVX512
            return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << cnt) - 1), values + j));
#else
            return 0;
#endif
        },
        [values](int64_t j) { return half_bits_to_float(values[j]); });
}

void scatter_i8(const uint64_t* bits, int64_t n_s, const uint8_t* codes, float lo, float step, float* dst) {
    // lo + step * code, as dequantize_u8 computes it (a multiply, then an add: no fused rounding).
    scatter_values(
        bits, n_s, dst,
        [codes, lo, step]([[maybe_unused]] int64_t j, [[maybe_unused]] int cnt) {
#if RAZOR_UNPACK_AVX512
            const __m128i c = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << cnt) - 1), codes + j);
            const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c));
            return _mm512_add_ps(_mm512_set1_ps(lo), _mm512_mul_ps(_mm512_set1_ps(step), v));
#else
            return 0;
#endif
        },
        [codes, lo, step](int64_t j) { return dequantize_u8(codes[j], lo, step); });
}

}  // namespace

const char* value_codec_name(ValueCodec codec) {
    switch (codec) {
        case ValueCodec::F32: return "f32";
        case ValueCodec::F16: return "f16";
        case ValueCodec::I8: return "i8";
    }
    return "?";
}

int64_t value_codec_bytes(ValueCodec codec) {
    switch (codec) {
        case ValueCodec::F32: return 4;
        case ValueCodec::F16: return 2;
        case ValueCodec::I8: return 1;
    }
    return 0;
}

void extend_range(const float* v, int64_t n, float& mn, float& mx) {
    int64_t i = 0;
    // min_ps(x, acc) returns acc when x is NaN, as std::min(acc, x) does: the same result, a register at a time
#if defined(RAZOR_UNPACK_AVX512)
    __m512 vmn = _mm512_set1_ps(mn), vmx = _mm512_set1_ps(mx);
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(v + i);
        vmn = _mm512_min_ps(x, vmn), vmx = _mm512_max_ps(x, vmx);
    }
    mn = _mm512_reduce_min_ps(vmn), mx = _mm512_reduce_max_ps(vmx);
#elif defined(RAZOR_UNPACK_AVX2)
    if (n >= 8) {
        __m256 vmn = _mm256_set1_ps(mn), vmx = _mm256_set1_ps(mx);
        for (; i + 8 <= n; i += 8) {
            const __m256 x = _mm256_loadu_ps(v + i);
            vmn = _mm256_min_ps(x, vmn), vmx = _mm256_max_ps(x, vmx);
        }
        alignas(32) float lanes_mn[8], lanes_mx[8];
        _mm256_store_ps(lanes_mn, vmn), _mm256_store_ps(lanes_mx, vmx);
        for (int k = 0; k < 8; ++k) mn = std::min(mn, lanes_mn[k]), mx = std::max(mx, lanes_mx[k]);
    }
#endif
    for (; i < n; ++i) mn = std::min(mn, v[i]), mx = std::max(mx, v[i]);
}

void affine_u8_params(const float* v, int64_t n, float& lo, float& step) {
    if (n == 0) {
        lo = 0.f, step = 0.f;
        return;
    }
    float mn = v[0], mx = v[0];
    extend_range(v + 1, n - 1, mn, mx);
    lo = mn;
    step = (mx - mn) / 255.f;
}

void quantize_u8(const float* v, int64_t n, float lo, float step, uint8_t* codes) {
    const float inv = step > 0.f ? 1.f / step : 0.f;
    int64_t i = 0;
#if defined(RAZOR_UNPACK_AVX512)
    // The scalar loop's arithmetic 16 lanes at a time (a subtract, then a multiply; round to nearest even; clamp),
    // so the codes are identical. GCC's own vectorisation of the loop below ran at about 1.3 values per cycle.
    const __m512 vlo = _mm512_set1_ps(lo), vinv = _mm512_set1_ps(inv);
    const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.f);
    for (; i + 16 <= n; i += 16) {
        const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + i), vlo), vinv),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i k = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(q, zero), top));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_cvtepi32_epi8(k));
    }
#endif
    for (; i < n; ++i) {
        // round to nearest (even), clamped: values at max can land on 255.000x through the reciprocal
        const float q = std::nearbyint((v[i] - lo) * inv);
        codes[i] = static_cast<uint8_t>(std::clamp(q, 0.f, 255.f));
    }
}

int64_t RazoredTensor::layout_bytes(int64_t B, int64_t n_s, int64_t total_kept, ValueCodec codec) {
    return sections(B, (n_s + 63) / 64, total_kept, codec).end;
}

RazoredTensor::RazoredTensor(Shape shape, std::shared_ptr<const Payload> payload)
    : SavedTensor(std::move(shape), DType::F32), payload_(std::move(payload)) {}

std::unique_ptr<RazoredTensor> RazoredTensor::share() const {
    return std::unique_ptr<RazoredTensor>(new RazoredTensor(shape(), payload_));
}

std::unique_ptr<RazoredTensor> RazoredTensor::from_payload(const std::shared_ptr<const void>& handle, Shape shape) {
    auto payload = std::static_pointer_cast<const Payload>(handle);
    RAZOR_CHECK(payload && shape_numel(shape) == payload->B * payload->n_s) << "RazoredTensor::from_payload: shape "
                                                                           << shape_str(shape) << " does not fit";
    return std::unique_ptr<RazoredTensor>(new RazoredTensor(std::move(shape), std::move(payload)));
}

std::unique_ptr<RazoredTensor> RazoredTensor::pack(const Tensor& x_in, const RazorPackOptions& options) {
    if (x_in.dtype() != DType::F32)
        throw Error(fmt("RazoredTensor::pack: expected an f32 tensor, got ", dtype_name(x_in.dtype()), " ",
                        shape_str(x_in.shape()), "; hint: Back Razor prunes float activations only"));
    if (!(options.ratio >= 0.0 && options.ratio <= 1.0))
        throw Error(fmt("RazoredTensor::pack: expected a prune ratio r in [0, 1] (the fraction dropped), got ",
                        options.ratio, "; hint: r = 0.9 keeps 10% of each sample"));
    const Tensor x = x_in.contiguous();   // row-major; a copy only for views (matmul's transposed operands)
    int64_t B = 0, n_s = 0;
    batch_view(x.shape(), B, n_s);
    const int64_t W = (n_s + 63) / 64;
    const int64_t c = keep_count(n_s, options.ratio);
    const ValueCodec codec = options.values;
    const int64_t vbytes = value_codec_bytes(codec);
    // Segment capacity per sample: razor mode never keeps more than c, so the common case (every sample keeps
    // exactly c: no sample with fewer than c non-zeros) is laid out exactly on the first try, one allocation.
    const int64_t cap = options.ties == TieMode::Razor ? c : n_s;

    auto payload = std::make_shared<Payload>();
    payload->options = options;
    payload->B = B, payload->n_s = n_s, payload->W = W, payload->c = c;
    const Sections first = sections(B, W, B * cap, codec);
    payload->storage = std::make_shared<Storage>(static_cast<size_t>(first.end));
    uint64_t* bits = at<uint64_t>(payload->storage, first.bitmap);
    int64_t* offsets = at<int64_t>(payload->storage, first.offsets);
    float* qparams = codec == ValueCodec::I8 ? at<float>(payload->storage, first.qparams) : nullptr;
    char* values = at<char>(payload->storage, first.values);
    std::vector<int64_t> counts(static_cast<size_t>(B), 0);

    const float* px = x.f32();
#ifndef NDEBUG
    for (int64_t i = 0; i < B * n_s; ++i)
        RAZOR_CHECK(std::isfinite(px[i])) << "Back Razor masker: non-finite value " << px[i] << " at flat index " << i
                                          << " of " << shape_str(x.shape()) << " (Debug builds check this; Release "
                                          << "ranks NaN above inf above every finite value and keeps it)";
#endif
    bool overflow = false;
    const Isa isa = options.isa;
    if (n_s > 0 && B > 0) {
        count_masker_call(B);
#pragma omp parallel if (B > 1 && B * n_s >= kParallelElements)
        {
            MaskerScratch scratch;
            std::vector<float> kept_f32;   // int8: the kept values before quantisation, (c)
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < B; ++b) {
                const float* xb = px + b * n_s;   // (n_s)
                uint64_t* bb = bits + b * W;      // (W)
                const SampleThreshold t = select_threshold(xb, n_s, c, options.ties, scratch, isa);
                char* seg = values + b * cap * vbytes;
                int64_t count = 0;
                if (codec == ValueCodec::F32) {
                    count = pack_sample_f32(xb, n_s, t, bb, reinterpret_cast<float*>(seg), isa);
                } else if (codec == ValueCodec::F16) {
                    count = pack_sample_f16(xb, n_s, t, bb, reinterpret_cast<uint16_t*>(seg), isa);
                } else {
                    kept_f32.resize(static_cast<size_t>(t.kept()));
                    count = pack_sample_f32(xb, n_s, t, bb, kept_f32.data(), isa);
                    float lo = 0.f, step = 0.f;
                    affine_u8_params(kept_f32.data(), count, lo, step);
                    quantize_u8(kept_f32.data(), count, lo, step, reinterpret_cast<uint8_t*>(seg));
                    qparams[2 * b] = lo, qparams[2 * b + 1] = step;
                }
                if (count > cap) overflow = true;   // cannot happen (select caps it); checked outside the region
                counts[static_cast<size_t>(b)] = count;
            }
        }
    }
    RAZOR_CHECK(!overflow) << "RazoredTensor::pack: a sample kept more than its capacity " << cap;
    offsets[0] = 0;
    for (int64_t b = 0; b < B; ++b) offsets[b + 1] = offsets[b] + counts[static_cast<size_t>(b)];

    if (offsets[B] != B * cap) {
        // Some sample kept fewer than its capacity (fewer than c non-zeros, or reference ties): re-lay the payload
        // out exactly, so that the buffer holds no slack. Costs one copy of the (small) compressed form.
        const Sections exact = sections(B, W, offsets[B], codec);
        auto storage = std::make_shared<Storage>(static_cast<size_t>(exact.end));
        std::memcpy(at<char>(storage, exact.bitmap), bits, static_cast<size_t>(8 * B * W));
        std::memcpy(at<char>(storage, exact.offsets), offsets, static_cast<size_t>(8 * (B + 1)));
        if (qparams) std::memcpy(at<char>(storage, exact.qparams), qparams, static_cast<size_t>(8 * B));
        char* dst = at<char>(storage, exact.values);
        for (int64_t b = 0; b < B; ++b)
            std::memcpy(dst + offsets[b] * vbytes, values + b * cap * vbytes,
                        static_cast<size_t>(counts[static_cast<size_t>(b)] * vbytes));
        payload->storage = std::move(storage);
    }
    return std::unique_ptr<RazoredTensor>(new RazoredTensor(x.shape(), std::move(payload)));
}

const uint64_t* RazoredTensor::bitmap() const { return at<uint64_t>(payload_->storage, 0); }

const int64_t* RazoredTensor::offsets() const {
    return at<int64_t>(payload_->storage, sections(batch(), words_per_sample(), 0, value_codec()).offsets);
}

const float* RazoredTensor::qparams() const {
    if (value_codec() != ValueCodec::I8) return nullptr;
    return at<float>(payload_->storage, sections(batch(), words_per_sample(), 0, value_codec()).qparams);
}

const void* RazoredTensor::values() const {
    return at<char>(payload_->storage, sections(batch(), words_per_sample(), 0, value_codec()).values);
}
const float* RazoredTensor::values_f32() const {
    return value_codec() == ValueCodec::F32 ? static_cast<const float*>(values()) : nullptr;
}
const uint16_t* RazoredTensor::values_f16() const {
    return value_codec() == ValueCodec::F16 ? static_cast<const uint16_t*>(values()) : nullptr;
}
const uint8_t* RazoredTensor::values_i8() const {
    return value_codec() == ValueCodec::I8 ? static_cast<const uint8_t*>(values()) : nullptr;
}

int64_t RazoredTensor::stored_bytes() const { return static_cast<int64_t>(payload_->storage->bytes); }

std::string RazoredTensor::format() const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bitmap+%s r=%.2f%s", value_codec_name(value_codec()), ratio(),
                  tie_mode() == TieMode::Reference ? " ties=reference" : "");
    return buf;
}

// Sample b, dense: kept values at their bitmap positions, zeros elsewhere. out: (n_s)
void RazoredTensor::unpack_sample(int64_t b, float* out) const {
    const int64_t n_s = sample_numel(), W = words_per_sample();
    const uint64_t* bits = bitmap() + b * W;
    const int64_t first = offsets()[b];
    switch (value_codec()) {
        case ValueCodec::F32: scatter_f32(bits, n_s, static_cast<const float*>(values()) + first, out); break;
        case ValueCodec::F16: scatter_f16(bits, n_s, static_cast<const uint16_t*>(values()) + first, out); break;
        case ValueCodec::I8:
            scatter_i8(bits, n_s, static_cast<const uint8_t*>(values()) + first, qparams()[2 * b],
                       qparams()[2 * b + 1], out);
            break;
    }
}

void RazoredTensor::unpack_into(float* dst) const {
    const int64_t B = batch(), n_s = sample_numel();
#pragma omp parallel for schedule(static) if (B > 1 && B * n_s >= kParallelElements)
    for (int64_t b = 0; b < B; ++b) unpack_sample(b, dst + b * n_s);
}

void RazoredTensor::unpack_rows(int64_t first, int64_t count, float* dst) const {
    RAZOR_CHECK(first >= 0 && count >= 0 && first + count <= batch())
        << "RazoredTensor::unpack_rows: samples [" << first << ", " << first + count << ") of " << batch();
    for (int64_t b = first; b < first + count; ++b) unpack_sample(b, dst + (b - first) * sample_numel());
}

std::optional<SparseSamples> RazoredTensor::sparse_samples() const {
    SparseSamples s;
    s.samples = batch();
    s.sample_numel = sample_numel();
    s.words_per_sample = words_per_sample();
    s.bitmap = bitmap();
    s.offsets = offsets();
    s.data = values();
    s.qparams = qparams();
    switch (value_codec()) {
        case ValueCodec::F32: s.values = SparseSamples::Values::F32; break;
        case ValueCodec::F16: s.values = SparseSamples::Values::F16; break;
        case ValueCodec::I8: s.values = SparseSamples::Values::U8; break;
    }
    return s;
}

Tensor RazoredTensor::unpack() const {
    Tensor t = Tensor::empty(shape());
    if (t.numel() > 0) unpack_into(t.f32());
    return t;
}

}  // namespace razor::sparse
