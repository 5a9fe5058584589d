// bench/razor_select_bench.cpp -- what Back Razor's select + pack costs on the conv inputs of one ResNet-20 step.
//
// docs: docs/back-razor.md "Measured cost".
//
// Workload: the 19 distinct conv inputs of a ResNet-20 (16/32/64, 1x1 projection shortcuts, which read the same
// tensor as their block's conv1 and are deduplicated by the policy) at batch 128: 187,392 floats per image,
// 23.99 M in all (96 MB). The stem input is N(0, 1) (a normalised image); the others are relu(N(0, 1)) (about 50%
// zeros, as post-BN-ReLU maps).
//
// Each variant runs over all 19 tensors; the median of --reps timed runs after 2 warm-ups is reported, variants
// interleaved round-robin so that the machine's drift hits them alike (baselines.md §1.1). Compare the rows of one
// run with each other, not with other days.
//
//   ./build/bench/backrazor/razor_select_bench [--reps 9] [--threads 2] [--ratio 0.9] [--only "bitmap + f32"] [--steps 5]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/core.h"
#include "sparse/back_razor.h"

using namespace razor;
using namespace razor::sparse;

namespace {

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The alternative the spec also allows: per sample, copy the magnitude keys to a per-thread scratch and
// nth_element them (selection only, no packing), to compare with the histogram select.
int64_t nth_element_select(const std::vector<Tensor>& xs, double r) {
    int64_t checksum = 0;
    for (const Tensor& x : xs) {
        const int64_t B = x.size(0), n_s = x.numel() / B, c = keep_count(n_s, r);
        const float* px = x.f32();
#pragma omp parallel reduction(+ : checksum)
        {
            std::vector<uint32_t> keys(static_cast<size_t>(n_s));
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < B; ++b) {
                const float* s = px + b * n_s;
                for (int64_t i = 0; i < n_s; ++i) {
                    uint32_t bits;
                    std::memcpy(&bits, s + i, 4);
                    keys[static_cast<size_t>(i)] = magnitude_key(bits);
                }
                std::nth_element(keys.begin(), keys.begin() + (n_s - c), keys.end());
                checksum += keys[static_cast<size_t>(n_s - c)] & 1u;
            }
        }
    }
    return checksum;
}

// Histogram select alone (no packing).
int64_t histogram_select(const std::vector<Tensor>& xs, double r) {
    int64_t checksum = 0;
    for (const Tensor& x : xs) {
        const int64_t B = x.size(0), n_s = x.numel() / B, c = keep_count(n_s, r);
        const float* px = x.f32();
#pragma omp parallel reduction(+ : checksum)
        {
            MaskerScratch scratch;
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < B; ++b)
                checksum += select_threshold(px + b * n_s, n_s, c, TieMode::Razor, scratch).kept();
        }
    }
    return checksum;
}

// Pack alone, from precomputed thresholds, into preallocated buffers (the kernel without selection or allocation).
int64_t pack_only(const std::vector<Tensor>& xs, const std::vector<std::vector<SampleThreshold>>& thresholds,
                  std::vector<std::vector<uint64_t>>& bits, std::vector<std::vector<float>>& values) {
    int64_t total = 0;
    for (size_t t = 0; t < xs.size(); ++t) {
        const Tensor& x = xs[t];
        const int64_t B = x.size(0), n_s = x.numel() / B, W = (n_s + 63) / 64, cap = n_s;
        const float* px = x.f32();
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : total)
        for (int64_t b = 0; b < B; ++b)
            total += pack_sample_f32(px + b * n_s, n_s, thresholds[t][static_cast<size_t>(b)], bits[t].data() + b * W,
                                     values[t].data() + b * cap);
    }
    return total;
}

// ResNet-20 (16/32/64, 1x1 + BN projection shortcuts, baselines.md §2.1) as functional ops with leaf parameters,
// for timing whole training steps (forward + backward) under a save policy.
struct ResNet20 {
    std::vector<Tensor> params;
    struct Norm {
        Tensor weight, bias, running_mean, running_var;
    };
    struct Block {
        Tensor w1, w2, w_proj;
        Norm n1, n2, n_proj;
        int64_t stride = 1;
    };
    Tensor w_stem, w_fc, b_fc;
    Norm n_stem;
    std::vector<Block> blocks;
    Generator gen{1};

    Tensor conv_weight(int64_t oc, int64_t ic, int64_t k) {
        Tensor w = Tensor::randn({oc, ic, k, k}, gen);
        w.mul_(std::sqrt(2.f / static_cast<float>(ic * k * k)));
        params.push_back(w.requires_grad_());
        return params.back();
    }
    Norm norm(int64_t c) {
        params.push_back(Tensor::ones({c}).requires_grad_());
        params.push_back(Tensor::zeros({c}).requires_grad_());
        return Norm{params[params.size() - 2], params.back(), Tensor::zeros({c}), Tensor::ones({c})};
    }
    ResNet20() {
        w_stem = conv_weight(16, 3, 3), n_stem = norm(16);
        int64_t in = 16;
        for (int64_t width : {16, 32, 64}) {
            for (int i = 0; i < 3; ++i) {
                Block b;
                b.stride = (i == 0 && width != 16) ? 2 : 1;
                b.w1 = conv_weight(width, in, 3), b.n1 = norm(width);
                b.w2 = conv_weight(width, width, 3), b.n2 = norm(width);
                if (b.stride != 1) b.w_proj = conv_weight(width, in, 1), b.n_proj = norm(width);
                blocks.push_back(b);
                in = width;
            }
        }
        params.push_back(Tensor::randn({10, 64}, gen).mul_(0.1f).requires_grad_()), w_fc = params.back();
        params.push_back(Tensor::zeros({10}).requires_grad_()), b_fc = params.back();
    }
    static Tensor bn(const Tensor& h, const Norm& n) {
        return batch_norm(h, n.weight, n.bias, n.running_mean, n.running_var, true);
    }
    Tensor forward(const Tensor& x) {
        Conv2dOptions same;
        same.padding = {1, 1};
        Tensor h = relu(bn(conv2d(x, w_stem, Tensor(), same), n_stem));
        for (const Block& b : blocks) {
            Conv2dOptions first = same;
            first.stride = {b.stride, b.stride};
            Tensor y = relu(bn(conv2d(h, b.w1, Tensor(), first), b.n1));
            y = bn(conv2d(y, b.w2, Tensor(), same), b.n2);
            Tensor shortcut = h;
            if (b.w_proj.defined()) {
                Conv2dOptions proj;
                proj.stride = {b.stride, b.stride};
                shortcut = bn(conv2d(h, b.w_proj, Tensor(), proj), b.n_proj);
            }
            h = relu(add(y, shortcut));
        }
        return linear(flatten(adaptive_avg_pool2d(h, {1, 1}), 1), w_fc, b_fc);
    }
};

}  // namespace

int main(int argc, char** argv) {
    int reps = 9, threads = 2;
    double ratio = 0.9;
    std::string only;   // run only the variants whose name contains this (plus the floor)
    int steps = 0;      // > 0: also time whole ResNet-20 training steps under each save policy
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--reps") reps = std::atoi(argv[i + 1]);
        else if (flag == "--threads") threads = std::atoi(argv[i + 1]);
        else if (flag == "--ratio") ratio = std::atof(argv[i + 1]);
        else if (flag == "--only") only = argv[i + 1];
        else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "razor_select_bench: unknown flag %s; flags: --reps N --threads N --ratio R --only SUBSTRING --steps N\n", argv[i]);
            return 2;
        }
    }
    set_num_threads(threads);
    std::printf("%s\n", runtime_banner().c_str());
    std::printf("masker kernels: %s; fp16 conversion: %s\n", masker_kernels(),
                f16c_enabled() ? "F16C" : "portable");

    // ResNet-20 conv inputs at batch 128 (shortcut inputs deduplicated).
    const int64_t N = 128;
    std::vector<Shape> shapes{{N, 3, 32, 32}};
    for (int i = 0; i < 7; ++i) shapes.push_back({N, 16, 32, 32});
    for (int i = 0; i < 6; ++i) shapes.push_back({N, 32, 16, 16});
    for (int i = 0; i < 5; ++i) shapes.push_back({N, 64, 8, 8});
    Generator gen(0);
    std::vector<Tensor> xs;
    int64_t total = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
        Tensor x = Tensor::randn(shapes[i], gen);
        if (i > 0) {
            float* p = x.f32();
            for (int64_t j = 0; j < x.numel(); ++j) p[j] = std::max(p[j], 0.f);
        }
        total += x.numel();
        xs.push_back(x);
    }
    std::printf("workload: %zu conv inputs, %.2f M floats (%.1f MB), r = %.2f, %d threads, median of %d\n",
                xs.size(), total / 1e6, total * 4 / 1e6, ratio, num_threads(), reps);

    std::vector<std::unique_ptr<RazoredTensor>> packed(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) packed[i] = RazoredTensor::pack(xs[i], {.ratio = ratio});
    std::vector<Tensor> dense(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) dense[i] = Tensor::empty(xs[i].shape());

    std::vector<std::vector<SampleThreshold>> thresholds(xs.size());
    std::vector<std::vector<uint64_t>> bits(xs.size());
    std::vector<std::vector<float>> values(xs.size());
    for (size_t t = 0; t < xs.size(); ++t) {
        const int64_t B = xs[t].size(0), n_s = xs[t].numel() / B;
        MaskerScratch scratch;
        for (int64_t b = 0; b < B; ++b)
            thresholds[t].push_back(select_threshold(xs[t].f32() + b * n_s, n_s, keep_count(n_s, ratio),
                                                     TieMode::Razor, scratch));
        bits[t].resize(static_cast<size_t>(B * ((n_s + 63) / 64)));
        values[t].resize(static_cast<size_t>(B * n_s));
    }

    volatile int64_t sink = 0;
    struct Variant {
        std::string name;
        std::function<void()> fn;
        std::vector<double> ms;
    };
    auto pack_all = [&](RazorPackOptions o) {
        return [&, o] {
            for (const Tensor& x : xs) sink = sink + RazoredTensor::pack(x, o)->stored_bytes();
        };
    };
    std::vector<Variant> variants;
    variants.push_back({"x > 0 bitmask (one streaming pass; baselines §7 floor)", [&] {
                            for (const Tensor& x : xs) sink = sink + BitMask::from_positive(x.f32(), x.numel()).nbytes();
                        }, {}});
    variants.push_back({"select only: histogram (razor's kernel)", [&] { sink = sink + histogram_select(xs, ratio); }, {}});
    variants.push_back({"select only: nth_element on a scratch copy", [&] { sink = sink + nth_element_select(xs, ratio); }, {}});
    variants.push_back({"pack only (given thresholds, preallocated), f32",
                        [&] { sink = sink + pack_only(xs, thresholds, bits, values); }, {}});
    variants.push_back({"select + pack, bitmap + f32", pack_all({.ratio = ratio, .values = ValueCodec::F32}), {}});
    variants.push_back({"select + pack, bitmap + f16", pack_all({.ratio = ratio, .values = ValueCodec::F16}), {}});
    variants.push_back({"select + pack, bitmap + i8", pack_all({.ratio = ratio, .values = ValueCodec::I8}), {}});
    variants.push_back({"select + pack, f32, portable scalar kernels",
                        pack_all({.ratio = ratio, .values = ValueCodec::F32, .isa = Isa::Generic}), {}});
    variants.push_back({"select + pack, f32, reference ties", pack_all({.ratio = ratio, .ties = TieMode::Reference}), {}});
    variants.push_back({"unpack bitmap + f32 -> dense", [&] {
                            for (size_t i = 0; i < xs.size(); ++i) packed[i]->unpack_into(dense[i].f32());
                        }, {}});

    if (!only.empty())
        std::erase_if(variants, [&](const Variant& v) { return v.name.find(only) == std::string::npos && v.name[0] != 'x'; });
    for (int rep = 0; rep < reps + 2; ++rep) {
        for (Variant& v : variants) {
            const double t0 = now_ms();
            v.fn();
            const double t1 = now_ms();
            if (rep >= 2) v.ms.push_back(t1 - t0);
        }
    }
    int64_t stored = 0, dense_bytes = 0;
    for (const auto& p : packed) stored += p->stored_bytes(), dense_bytes += p->dense_bytes();

    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const double floor_ms = median(variants[0].ms);
    std::printf("\n%-56s %9s %9s %9s %11s\n", "variant (all 19 tensors)", "median ms", "min ms", "x floor",
                "% of 250 ms");
    for (Variant& v : variants) {
        const double m = median(v.ms);
        std::printf("%-56s %9.1f %9.1f %9.2f %10.1f%%\n", v.name.c_str(), m, *std::min_element(v.ms.begin(), v.ms.end()),
                    m / floor_ms, 100.0 * m / 250.0);
    }
    std::printf("\nbitmap + f32 at r = %.2f: %s stored for %s dense (%.2fx)\n", ratio, format_bytes(stored).c_str(),
                format_bytes(dense_bytes).c_str(), static_cast<double>(dense_bytes) / stored);
    std::printf("(250 ms = the PyTorch 1.13 ResNet-20 step on this machine class, baselines.md §7; budget 10%% = 25 ms)\n");
    if (steps <= 0) return sink == -1;

    // Whole steps: forward + loss + backward of ResNet-20 at batch 128, dense tape vs Back Razor, interleaved.
    xs.clear(), packed.clear(), dense.clear(), values.clear(), bits.clear();
    ResNet20 net;
    Tensor x = Tensor::randn({N, 3, 32, 32}, gen);
    std::vector<int64_t> y(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) y[static_cast<size_t>(i)] = i % 10;
    const Tensor labels = Tensor::from_vector_i64({N}, y);
    struct StepVariant {
        std::string name;
        std::shared_ptr<const SavePolicy> policy;
        std::vector<double> ms;
        TapeTotals peak;
    };
    std::vector<StepVariant> sv;
    sv.push_back({"dense tape", std::make_shared<DenseSavePolicy>(), {}, {}});
    sv.push_back({"razor r=" + std::to_string(ratio).substr(0, 4) + " f32, conv/linear inputs only",
                  std::make_shared<RazorSavePolicy>(RazorConfig{.ratio = ratio}), {}, {}});
    sv.push_back({"razor r=" + std::to_string(ratio).substr(0, 4) + " f32, conv/linear + BN inputs",
                  std::make_shared<RazorSavePolicy>(RazorConfig{.ratio = ratio, .batch_norm = BatchNormSave::Razored}), {}, {}});
    for (int rep = 0; rep < steps + 1; ++rep) {
        for (StepVariant& v : sv) {
            for (Tensor& p : net.params) p.zero_grad();
            current_tape().reset_peak();
            const double t0 = now_ms();
            Tensor loss;
            {
                SavePolicyGuard guard(v.policy);
                loss = cross_entropy(net.forward(x), labels);
            }
            loss.backward();
            const double t1 = now_ms();
            if (rep >= 1) v.ms.push_back(t1 - t0);
            v.peak = current_tape().peak();
        }
    }
    std::printf("\nResNet-20 training step (forward + backward), batch 128, %d threads, median of %d:\n", num_threads(), steps);
    const double base = median(sv[0].ms);
    for (StepVariant& v : sv)
        std::printf("  %-52s %8.1f ms (%+6.1f ms, %+5.1f%%)  tape peak %s\n", v.name.c_str(), median(v.ms),
                    median(v.ms) - base, 100.0 * (median(v.ms) - base) / base, format_bytes(v.peak.stored_bytes).c_str());
    return sink == -1;
}
