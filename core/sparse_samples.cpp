// core/sparse_samples.cpp -- decoding a sample's kept values (core/sparse_samples.h).
#include "core/sparse_samples.h"

#include <algorithm>

#include "core/float16.h"

namespace razor {

int64_t SparseSamples::max_kept() const {
    int64_t m = 0;
    for (int64_t b = 0; b < samples; ++b) m = std::max(m, kept(b));
    return m;
}

double SparseSamples::kept_fraction() const {
    const int64_t n = samples * sample_numel;
    return n > 0 ? static_cast<double>(offsets[samples]) / static_cast<double>(n) : 0.0;
}

void SparseSamples::decode_values(int64_t b, float* out) const {
    const int64_t first = offsets[b], n = kept(b);
    switch (values) {
        case Values::F32: std::copy_n(static_cast<const float*>(data) + first, n, out); return;
        case Values::F16: {
            const uint16_t* h = static_cast<const uint16_t*>(data) + first;
            for (int64_t i = 0; i < n; ++i) out[i] = half_bits_to_float(h[i]);
            return;
        }
        case Values::U8: {
            const uint8_t* c = static_cast<const uint8_t*>(data) + first;
            const float lo = qparams[2 * b], step = qparams[2 * b + 1];
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = lo + step * static_cast<float>(c[i]);
            return;
        }
    }
}

}  // namespace razor
