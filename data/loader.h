// data/loader.h -- DataLoader: seeded shuffling, per-image augmentation, batching, background prefetch.
//
// reference: torch.utils.data.DataLoader (batch_size, shuffle, drop_last, num_workers, prefetch_factor; a new
// shuffle every epoch; len(loader) = batches per epoch). docs: docs/data.md "DataLoader".
//
//   data::DataLoader loader(train_set, train_transform, {.batch_size = 128, .shuffle = true, .drop_last = true, .seed = 0});
//   for (int64_t epoch = 0; epoch < epochs; ++epoch)
//       for (data::Batch& batch : loader) { ... batch.images (B, C, H, W) f32, batch.labels (B) i64 ... }
//
// Reproducibility: epoch e's order is a shuffle drawn from a generator seeded by (seed, e), and the image at
// position k of that epoch is transformed with its own generator seeded by (seed, e, k). Nothing depends on which
// thread builds a batch or when, so the same seed gives bit-identical batches for any `workers` and any OpenMP
// thread count. set_epoch(e) makes the next epoch e (to resume a run); set_epoch(e, b) also starts it at batch b
// (a run resumed mid-epoch: batches 0..b-1 are neither read nor transformed, and b.. are the ones an uninterrupted
// epoch would have given).
//
// Threading: with workers >= 1, that many background producer threads build whole batches (read or decode, transform,
// copy into the batch tensor) ahead of the consumer, at most max(prefetch, workers) batches ahead, and the consumer
// takes them strictly in order. The producers use no OpenMP, so they do not compete with the trainer's thread team
// for more than their own cores. An exception thrown while building batch b is re-thrown by next() when the consumer
// reaches batch b (earlier batches arrive normally); the epoch then ends. Destroying the loader, or starting a new
// epoch mid-epoch, stops the producers within one image and joins them.
//
// One consumer: next() / iteration is not meant to be called from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/transforms.h"

namespace razor::data {

struct DataLoaderOptions {
    int64_t batch_size = 64;
    bool shuffle = false;        // PyTorch's default: in dataset order
    bool drop_last = false;      // drop the last, smaller batch
    uint64_t seed = 0;           // shuffle and augmentation seed
    int64_t workers = 1;         // background producer threads; 0 builds each batch inside next()
    int64_t prefetch = 4;        // batches built ahead of the consumer (the queue bound), raised to `workers`
};

struct LoaderStats {
    int64_t batches = 0;          // handed to the consumer since construction
    int64_t images = 0;
    double wait_seconds = 0;      // time next() spent blocked waiting for a batch: ~0 when prefetch keeps up
    double build_seconds = 0;     // time spent building batches, summed over producer threads
};

class DataLoader {
public:
    // transform maps each image (C, H, W) u8 to the f32 image that goes into the batch; null = ToFloat only.
    DataLoader(ImageDataset dataset, TransformPtr transform = nullptr, DataLoaderOptions options = {});
    ~DataLoader();   // stops and joins the producers, mid-epoch too
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    int64_t size() const;     // batches per epoch (PyTorch's len(loader))
    // The next batch of the running epoch, starting an epoch when none runs; std::nullopt once the epoch is over
    // (the call after that starts the next epoch).
    std::optional<Batch> next();
    // The next epoch started gets this index and begins at batch start_batch (in [0, size()]); later epochs at 0.
    void set_epoch(int64_t epoch, int64_t start_batch = 0);
    int64_t epoch() const { return epoch_; }   // index of the running or last epoch; -1 before the first

    const ImageDataset& dataset() const { return dataset_; }
    const DataLoaderOptions& options() const { return options_; }
    LoaderStats stats() const;
    std::string repr() const;   // "DataLoader(cifar10/train, 50000 images, batch 128, shuffle, drop_last, 1 worker, ...)"

    // Range-for: begin() starts a new epoch (stopping a running one); iterating yields Batch&.
    class Iterator {
    public:
        Batch& operator*() { return *batch_; }
        Batch* operator->() { return &*batch_; }
        Iterator& operator++();
        bool operator==(const Iterator& other) const { return loader_ == other.loader_; }
        bool operator!=(const Iterator& other) const { return loader_ != other.loader_; }

    private:
        friend class DataLoader;
        explicit Iterator(DataLoader* loader) : loader_(loader) {}
        DataLoader* loader_;          // null at the end
        std::optional<Batch> batch_;
    };
    Iterator begin();
    Iterator end() { return Iterator(nullptr); }

private:
    struct Epoch;
    void start_epoch();
    void stop_epoch();
    Batch build_batch(const Epoch& run, int64_t b) const;
    void produce(Epoch& run);

    ImageDataset dataset_;
    TransformPtr transform_;
    DataLoaderOptions options_;
    int64_t epoch_ = -1, next_epoch_ = 0, next_start_batch_ = 0;
    std::unique_ptr<Epoch> run_;
    mutable std::mutex stats_mutex_;
    LoaderStats stats_;
};

}  // namespace razor::data
