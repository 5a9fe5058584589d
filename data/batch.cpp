// data/batch.cpp -- see batch.h.
#include "data/batch.h"

#include "core/check.h"
#include "core/rng.h"

namespace razor::data {

Batch make_batch(const ImageDataset& ds, const std::vector<int64_t>& indices, int64_t begin, int64_t end,
                 const std::vector<float>& mean, const std::vector<float>& std) {
    if (!ds.in_memory())
        throw Error(fmt("make_batch(", ds.name, "): the images are on disk; hint: use data::DataLoader, which decodes them"));
    const Shape& s = ds.images.shape();   // (N, C, H, W)
    const int64_t C = s[1], HW = s[2] * s[3], B = end - begin;
    if (static_cast<int64_t>(mean.size()) != C || static_cast<int64_t>(std.size()) != C)
        throw Error(fmt("make_batch(", ds.name, "): expected ", C, " mean/std values (one per channel), got ",
                        mean.size(), "/", std.size()));
    Batch batch{Tensor::empty({B, C, s[2], s[3]}), Tensor::empty({B}, DType::I64)};
    const Tensor images = ds.images.contiguous();
    const uint8_t* src = images.data<uint8_t>();
    float* dst = batch.images.f32();
    const int64_t* labels = ds.labels.i64();
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
        const int64_t row = indices[begin + b];
        RAZOR_CHECK(row >= 0 && row < s[0]) << "batch index " << row << " out of range";
        for (int64_t c = 0; c < C; ++c) {
            const float scale = 1.f / (255.f * std[c]), shift = -mean[c] / std[c];
            const uint8_t* in = src + (row * C + c) * HW;
            float* out = dst + (b * C + c) * HW;
            for (int64_t i = 0; i < HW; ++i) out[i] = in[i] * scale + shift;
        }
        batch.labels.i64()[b] = labels[row];
    }
    return batch;
}

std::vector<int64_t> shuffled_indices(int64_t n, Generator& gen) {
    std::vector<int64_t> idx(n);
    for (int64_t i = 0; i < n; ++i) idx[i] = i;
    for (int64_t i = n - 1; i > 0; --i) std::swap(idx[i], idx[gen.randint(i + 1)]);
    return idx;
}

}  // namespace razor::data
