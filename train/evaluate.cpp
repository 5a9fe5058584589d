// train/evaluate.cpp -- see evaluate.h.
#include "train/evaluate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/core.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "train/progress.h"

namespace razor::train {

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
    const Tensor l = logits.contiguous();
    const int64_t N = l.size(0), K = l.size(1);
    const float* p = l.f32();
    const int64_t* y = labels.contiguous().i64();
    int64_t correct = 0;
    for (int64_t i = 0; i < N; ++i) {
        int64_t best = 0;
        for (int64_t k = 1; k < K; ++k)
            if (p[i * K + k] > p[i * K + best]) best = k;
        correct += best == y[i];
    }
    return correct;
}

EvalResult evaluate(nn::Module& model, const data::ImageDataset& ds, const std::vector<float>& mean,
                    const std::vector<float>& std, int64_t batch, const EvalOptions& options) {
    return evaluate(model, ds, data::compose({data::to_float_transform(), data::normalize_transform(mean, std)}), batch,
                    options);
}

EvalResult evaluate(nn::Module& model, const data::ImageDataset& ds, const data::TransformPtr& transform, int64_t batch,
                    const EvalOptions& options) {
    EvalResult r;
    r.class_correct.assign(ds.num_classes, 0);
    r.class_total.assign(ds.num_classes, 0);
    const bool was_training = model.is_training();
    NoGradGuard no_grad;
    model.eval();
    data::DataLoader loader(ds, transform, {.batch_size = batch, .shuffle = false, .drop_last = false, .workers = 1});
    const int64_t steps = options.max_batches > 0 ? std::min(options.max_batches, loader.size()) : loader.size();
    std::optional<Progress> progress;
    if (!options.progress.empty()) progress.emplace(options.progress, steps, batch);
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t step = 0, correct = 0;
    for (data::Batch& b : loader) {
        if (step == steps) break;
        const Tensor logits = model(b.images);                          // (B, K)
        const int64_t B = b.labels.size(0), K = logits.size(1);
        if (K != ds.num_classes)
            throw Error(fmt("evaluate: the model has ", K, " outputs but ", ds.name, " has ", ds.num_classes,
                            " classes; hint: check --classes and the checkpoint"));
        loss_sum += static_cast<double>(cross_entropy(logits, b.labels).item()) * B;
        const Tensor l = logits.contiguous();
        const float* p = l.f32();
        for (int64_t i = 0; i < B; ++i) {
            int64_t best = 0;
            for (int64_t k = 1; k < K; ++k)
                if (p[i * K + k] > p[i * K + best]) best = k;
            const int64_t y = b.labels.i64()[i];
            r.class_total[y] += 1;
            r.class_correct[y] += best == y;
            correct += best == y;
        }
        r.images += B;
        ++step;
        if (progress) progress->update(step, loss_sum / r.images, static_cast<double>(correct) / r.images);
    }
    if (progress) progress->finish();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.loss = r.images ? loss_sum / r.images : 0;
    r.accuracy = r.images ? static_cast<double>(correct) / r.images : 0;
    r.images_per_second = r.seconds > 0 ? r.images / r.seconds : 0;
    model.train(was_training);
    return r;
}

}  // namespace razor::train
