// data/loader.cpp -- DataLoader (see loader.h).
#include "data/loader.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <thread>

#include "core/check.h"
#include "core/rng.h"
#include "data/functional.h"

namespace razor::data {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A seed for stream `b` of stream family `a`: independent-looking for every (a, b), a pure function of both.
uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b + 0x632BE59BD9B4E019ull)); }

// Thrown inside a producer when the epoch is stopped; never leaves the loader.
struct Cancelled {};

}  // namespace

// One running epoch: its order, and the queue between producers and the consumer.
struct DataLoader::Epoch {
    int64_t index = 0;
    std::vector<int64_t> order;     // dataset rows in epoch order
    int64_t num_batches = 0;
    int64_t ahead = 1;              // batches that may be built beyond the one the consumer takes next

    std::mutex mutex;
    std::condition_variable built;  // a batch became ready
    std::condition_variable space;  // the consumer took one: producers may build further
    int64_t next_build = 0;         // next batch index a producer claims
    int64_t next_take = 0;          // next batch index the consumer takes
    struct Slot {
        std::optional<Batch> batch;
        std::exception_ptr error;
    };
    std::map<int64_t, Slot> ready;  // built, not yet taken
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
};

DataLoader::DataLoader(ImageDataset dataset, TransformPtr transform, DataLoaderOptions options)
    : dataset_(std::move(dataset)), transform_(std::move(transform)), options_(options) {
    if (options_.batch_size < 1 || options_.workers < 0 || options_.prefetch < 1)
        throw Error(fmt("DataLoader(", dataset_.name, "): expected batch_size >= 1, workers >= 0, prefetch >= 1; got ",
                        options_.batch_size, ", ", options_.workers, ", ", options_.prefetch));
    if (dataset_.size() == 0)
        throw Error(fmt("DataLoader(", dataset_.name, "): the dataset is empty; hint: check the data folder or class subset"));
    if (!transform_) transform_ = to_float_transform();
}

DataLoader::~DataLoader() { stop_epoch(); }

int64_t DataLoader::size() const {
    const int64_t n = dataset_.size(), b = options_.batch_size;
    return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::set_epoch(int64_t epoch, int64_t start_batch) {
    if (epoch < 0) throw Error(fmt("DataLoader::set_epoch: expected an epoch >= 0, got ", epoch));
    if (start_batch < 0 || start_batch > size())
        throw Error(fmt("DataLoader(", dataset_.name, ")::set_epoch: expected a start batch in [0, ", size(),
                        "], got ", start_batch, "; hint: a run resumed mid-epoch needs the batch size and data it was "
                        "checkpointed with"));
    next_epoch_ = epoch;
    next_start_batch_ = start_batch;
}

LoaderStats DataLoader::stats() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
}

std::string DataLoader::repr() const {
    return fmt("DataLoader(", dataset_.name, ", ", dataset_.size(), " images, batch ", options_.batch_size,
               options_.shuffle ? ", shuffle" : "", options_.drop_last ? ", drop_last" : "", ", ", options_.workers,
               options_.workers == 1 ? " worker" : " workers", ", prefetch ", options_.prefetch, ", seed ",
               options_.seed, ", ", transform_->repr(), ")");
}

Batch DataLoader::build_batch(const Epoch& run, int64_t b) const {
    const int64_t begin = b * options_.batch_size;
    const int64_t end = std::min(begin + options_.batch_size, dataset_.size());
    const int64_t count = end - begin;
    const uint64_t image_seed = mix(options_.seed, 2 * static_cast<uint64_t>(run.index) + 1);
    Batch batch;
    batch.labels = Tensor::empty({count}, DType::I64);   // (B)
    Shape shape;                                           // (C, H, W) of the first image; all must match
    for (int64_t k = begin; k < end; ++k) {
        if (run.stop.load(std::memory_order_relaxed)) throw Cancelled{};
        const int64_t row = run.order[k];
        Tensor out;
        try {
            Generator gen(mix(image_seed, static_cast<uint64_t>(k)));
            out = (*transform_)(dataset_.image(row), gen);
        } catch (const Error& e) {
            const std::string file = row < static_cast<int64_t>(dataset_.files.size()) ? " (" + dataset_.files[row] + ")" : "";
            throw Error(fmt("DataLoader(", dataset_.name, "): image ", row, file, ": ", e.what()));
        }
        if (out.dtype() != DType::F32 || out.dim() != 3)
            throw Error(fmt("DataLoader(", dataset_.name, "): the transform ", transform_->repr(), " gave a ",
                            dtype_name(out.dtype()), " ", shape_str(out.shape()), " for image ", row,
                            "; expected an f32 image (C, H, W); hint: end the transform with ToFloat() or Normalize"));
        if (k == begin) {
            shape = out.shape();
            batch.images = Tensor::empty({count, shape[0], shape[1], shape[2]});   // (B, C, H, W)
        } else if (out.shape() != shape) {
            throw Error(fmt("DataLoader(", dataset_.name, "): image ", row, " came out of ", transform_->repr(), " as ",
                            shape_str(out.shape()), ", the batch's first as ", shape_str(shape),
                            "; hint: add a Resize or RandomCrop so every image has one size"));
        }
        const Tensor src = out.contiguous();
        std::memcpy(batch.images.f32() + (k - begin) * src.numel(), src.f32(), src.nbytes());
        batch.labels.i64()[k - begin] = dataset_.labels.i64()[row];
    }
    return batch;
}

void DataLoader::produce(Epoch& run) {
    for (;;) {
        int64_t b;
        {
            std::unique_lock<std::mutex> lock(run.mutex);
            run.space.wait(lock, [&] {
                return run.stop || run.next_build >= run.num_batches || run.next_build < run.next_take + run.ahead;
            });
            if (run.stop || run.next_build >= run.num_batches) return;
            b = run.next_build++;
        }
        Epoch::Slot slot;
        const auto t0 = Clock::now();
        try {
            slot.batch = build_batch(run, b);
        } catch (const Cancelled&) {
            return;
        } catch (...) {
            slot.error = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(stats_mutex_);
            stats_.build_seconds += seconds_since(t0);
        }
        std::lock_guard<std::mutex> lock(run.mutex);
        run.ready.emplace(b, std::move(slot));
        run.built.notify_all();
    }
}

void DataLoader::start_epoch() {
    stop_epoch();
    auto run = std::make_unique<Epoch>();
    run->index = epoch_ = next_epoch_++;
    const int64_t n = dataset_.size();
    if (options_.shuffle) {
        Generator gen(mix(options_.seed, 2 * static_cast<uint64_t>(run->index)));
        run->order = shuffled_indices(n, gen);
    } else {
        run->order.resize(n);
        for (int64_t i = 0; i < n; ++i) run->order[i] = i;
    }
    run->num_batches = size();
    run->next_build = run->next_take = next_start_batch_;
    next_start_batch_ = 0;
    run->ahead = std::max(options_.prefetch, options_.workers);
    run_ = std::move(run);
    for (int64_t w = 0; w < options_.workers; ++w) run_->threads.emplace_back([this, r = run_.get()] { produce(*r); });
}

void DataLoader::stop_epoch() {
    if (!run_) return;
    {
        std::lock_guard<std::mutex> lock(run_->mutex);
        run_->stop = true;
    }
    run_->space.notify_all();
    for (std::thread& t : run_->threads) t.join();
    run_.reset();
}

std::optional<Batch> DataLoader::next() {
    if (!run_) start_epoch();
    Epoch& run = *run_;
    if (run.next_take >= run.num_batches) {
        stop_epoch();
        return std::nullopt;
    }
    const int64_t b = run.next_take;
    Epoch::Slot slot;
    const auto t0 = Clock::now();
    if (options_.workers == 0) {
        try {
            slot.batch = build_batch(run, b);
        } catch (...) {
            slot.error = std::current_exception();
        }
    } else {
        std::unique_lock<std::mutex> lock(run.mutex);
        run.built.wait(lock, [&] { return run.ready.count(b) > 0; });
        slot = std::move(run.ready.at(b));
        run.ready.erase(b);
        ++run.next_take;
        lock.unlock();
        run.space.notify_all();
    }
    const double waited = seconds_since(t0);
    if (options_.workers == 0) ++run.next_take;
    if (slot.error) {
        stop_epoch();   // the epoch cannot continue past a batch that failed
        std::rethrow_exception(slot.error);
    }
    std::lock_guard<std::mutex> lock(stats_mutex_);
    if (options_.workers == 0) stats_.build_seconds += waited;
    else stats_.wait_seconds += waited;
    ++stats_.batches;
    stats_.images += slot.batch->labels.size(0);
    return std::move(slot.batch);
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
    batch_ = loader_->next();
    if (!batch_) loader_ = nullptr;
    return *this;
}

DataLoader::Iterator DataLoader::begin() {
    start_epoch();
    Iterator it(this);
    ++it;
    return it;
}

}  // namespace razor::data
