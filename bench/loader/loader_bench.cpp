// bench/loader/loader_bench.cpp -- how fast razor's DataLoader feeds CIFAR-10 training, with nothing else running.
//
//   ./build/razor_loader_bench [CIFAR10_DIR] [--batch 128] [--workers 1] [--epochs 1] [--step-ms 0]
//   ./build/razor_loader_bench --folder ROOT [--image-size 224] ...     (an image folder, decoded from disk)
//
// With --folder: ROOT/train/CLASS/*.jpg stays on disk; every batch decodes its files (stb_image), then
// RandomResizedCrop(image-size, antialiased bilinear) -> flip -> ToFloat -> Normalize (ImageNet mean/std), the
// photo fine-tuning pipeline (data/preprocess.h), so images/s is decoded + augmented images per second.
//
// Pipeline: RandomCrop(32, padding=4) -> RandomHorizontalFlip -> ToFloat -> Normalize (CIFAR-10 mean/std), shuffled,
// drop_last, on the 50000 training images (loaded into memory first; load time printed separately).
// --step-ms simulates a trainer that spends that long on each batch: the wait column then says whether the
// producer keeps up (wait ~0) or the trainer stalls on data.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/check.h"
#include "data/cifar.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "data/preprocess.h"

using namespace razor;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
    std::string dir = std::string(RAZOR_SHARED_DIR) + "/datasets/cifar10";
    std::string folder;
    int64_t batch = 128, workers = 1, epochs = 1, step_ms = 0, image_size = 224;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&] {
            if (i + 1 >= argc) throw Error(fmt("razor_loader_bench: ", a, " needs a value"));
            return std::atoll(argv[++i]);
        };
        if (a == "--batch") batch = value();
        else if (a == "--workers") workers = value();
        else if (a == "--epochs") epochs = value();
        else if (a == "--step-ms") step_ms = value();
        else if (a == "--image-size") image_size = value();
        else if (a == "--folder" && i + 1 < argc) folder = argv[++i];
        else if (a.rfind("--", 0) == 0) {
            std::fprintf(stderr, "usage: %s [CIFAR10_DIR | --folder ROOT [--image-size N]] [--batch N] [--workers N] [--epochs N] "
                         "[--step-ms MS]\n", argv[0]);
            return 2;
        } else dir = a;
    }
    try {
        auto t0 = Clock::now();
        data::ImageFolderOptions on_disk;
        on_disk.in_memory = false, on_disk.any_size = true;
        data::ImageDataset train = folder.empty() ? data::load_cifar10(dir, true) : data::load_image_folder(folder, "train", on_disk);
        if (!folder.empty()) dir = folder;
        const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("load   %s: %lld images in %.2f s (%.0f images/s)\n", dir.c_str(), static_cast<long long>(train.size()),
                    load_s, train.size() / load_s);
        auto tf = data::compose({data::random_crop(32, 4), data::random_horizontal_flip(), data::to_float_transform(),
                                 data::normalize_transform(data::kCifar10Mean, data::kCifar10Std)});
        if (!folder.empty())
            tf = data::train_transform({.image_size = image_size, .crop_pct = 0.875,
                                        .interpolation = data::Interpolation::Bilinear,
                                        .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}},
                                       data::Augment::ResizedCropFlip);
        data::DataLoader loader(train, tf,
                                {.batch_size = batch, .shuffle = true, .drop_last = true, .seed = 0, .workers = workers});
        std::printf("loader %s\n", loader.repr().c_str());
        for (int64_t e = 0; e < epochs; ++e) {
            const data::LoaderStats before = loader.stats();
            t0 = Clock::now();
            double checksum = 0;
            for (data::Batch& b : loader) {
                checksum += b.images.f32()[0];
                if (step_ms) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
            }
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            const data::LoaderStats st = loader.stats();
            const int64_t images = st.images - before.images;
            std::printf("epoch  %lld: %lld images in %.2f s = %.0f images/s | consumer waited %.3f s | building %.2f s "
                        "(%.0f images/s per producer thread) | checksum %.3f\n",
                        static_cast<long long>(e), static_cast<long long>(images), s, images / s,
                        st.wait_seconds - before.wait_seconds, st.build_seconds - before.build_seconds,
                        images / (st.build_seconds - before.build_seconds), checksum);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "razor_loader_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
