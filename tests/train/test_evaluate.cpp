// tests/train/test_evaluate.cpp -- evaluation's memory (train/evaluate.h): it keeps no tape and frees what it
// allocated, so at the training batch it needs a fraction of a training step's memory (what razor train and finetune
// rely on when --eval-batch defaults to --batch). Tensor bytes from the allocator's counters (core/allocator.h).
#include <doctest/doctest.h>

#include "core/core.h"
#include "models/registry.h"
#include "train/evaluate.h"

using namespace razor;

namespace {

data::ImageDataset images(int64_t n) {
    Generator gen(5);
    data::ImageDataset ds;
    ds.images = Tensor::empty({n, 3, 32, 32}, DType::U8);
    ds.labels = Tensor::empty({n}, DType::I64);
    for (int64_t i = 0; i < n; ++i) ds.labels.i64()[i] = i % 10;
    for (int64_t i = 0; i < ds.images.numel(); ++i) ds.images.data<uint8_t>()[i] = static_cast<uint8_t>(gen.randint(256));
    ds.num_classes = 10, ds.name = "random";
    return ds;
}

}  // namespace

TEST_CASE("evaluate: no tape, everything freed; its peak at the training batch is a fraction of a training step's") {
    Generator gen(0);
    auto model = models::make_model("resnet20", 10, gen);
    const data::ImageDataset ds = images(16);
    const std::vector<float> mean = {0.5f, 0.5f, 0.5f}, std = {0.25f, 0.25f, 0.25f};
    constexpr int64_t kBatch = 8;

    const int64_t before = memory_stats().live_bytes;
    reset_peak_memory();
    const train::EvalResult r = train::evaluate(*model, ds, mean, std, kBatch);
    const int64_t eval_peak = memory_stats().peak_bytes - before;
    CHECK(r.images == 16);
    CHECK(memory_stats().live_bytes == before);   // nothing kept: no tape, no batch, no logits
    CHECK(model->is_training());                  // the mode it had

    // one dense training step on a batch of the same size: forward with the tape, backward, the gradients
    Tensor x = Tensor::empty({kBatch, 3, 32, 32});
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = static_cast<float>(gen.randint(256)) / 64.f - 2.f;
    const Tensor y = Tensor::from_vector_i64({kBatch}, {0, 1, 2, 3, 4, 5, 6, 7});
    const int64_t start = memory_stats().live_bytes;
    reset_peak_memory();
    cross_entropy((*model)(x), y).backward();
    const int64_t train_peak = memory_stats().peak_bytes - start;
    MESSAGE("resnet20, batch 8: evaluation peak " << eval_peak << " B, training step peak " << train_peak << " B");
    // A no-grad forward holds a few activations at a time; the step holds every saved one and then the gradients.
    // An evaluation that recorded a tape would hold them all too, and fail here.
    CHECK(eval_peak * 2 < train_peak);
}
