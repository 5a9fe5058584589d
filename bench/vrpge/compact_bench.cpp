// bench/vrpge/compact_bench.cpp -- where a compact VR-PGE pass spends its time: one forward + backward of
//   dense       the full model
//   narrow      the physically narrower dense model of the same subnetwork (extract(): the best case, no gathers)
//   compact     the full model with a fixed ChannelPlan (gathered weights, compact BN, scatter-adds)
// at one uniform random plan with keep k (with `stream`, ResNets: one mask per residual stream, as --stream-masks).
// Process CPU time per pass (getrusage), so a loaded machine inflates less than wall time; median of --steps. The
// last column is the compact pass's effective GFLOP/s over the dense pass's: (dense MACs / dense time) against
// (compact MACs / compact time).
//
// usage: razor_vrpge_compact_bench MODEL KEEP BATCH THREADS STEPS [stream]
//        (ONLY_COMPACT=1 in the environment skips the dense and narrow passes: for `perf record` of the compact one)
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/core.h"
#include "models/channel_plan.h"
#include "models/registry.h"

using namespace razor;

namespace {
double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

template <class F>
double median_cpu(int steps, F&& f) {
    f();   // warm-up
    std::vector<double> t;
    for (int i = 0; i < steps; ++i) {
        const double c0 = cpu_seconds();
        f();
        t.push_back(cpu_seconds() - c0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 6 && !(argc == 7 && std::string(argv[6]) == "stream")) {
        std::fprintf(stderr, "usage: %s MODEL KEEP BATCH THREADS STEPS [stream]\n", argv[0]);
        return 2;
    }
    const bool stream = argc == 7;
    const std::string name = argv[1];
    const double keep = std::atof(argv[2]);
    const int64_t batch = std::atoll(argv[3]);
    set_num_threads(std::atoi(argv[4]));
    const int steps = std::atoi(argv[5]);
    Generator gen(0);
    auto model = models::make_model(name, 10, gen);
    auto& p = models::channel_prunable(*model);
    const auto layers = stream ? sparse::share_stream_masks(p.scored_layers()) : p.scored_layers();
    models::ChannelPlan plan = models::ChannelPlan::dense(layers);
    for (const auto& layer : layers) {
        if (!layer.masked) continue;
        if (!layer.shares.empty()) {   // the stream's first writer's set
            plan.keep(layer.name, plan.at(layer.shares));
            continue;
        }
        std::vector<int64_t> k;
        for (int64_t c = 0; c < layer.channels; ++c)
            if (gen.uniform() < keep) k.push_back(c);
        if (k.empty()) k.push_back(0);
        plan.keep(layer.name, k);
    }
    auto narrow = p.extract(plan).model;
    narrow->train();
    const Tensor x = Tensor::randn({batch, 3, 32, 32}, gen);
    const Tensor y = Tensor::from_vector_i64({batch}, std::vector<int64_t>(batch, 1));
    auto pass = [&](nn::Module& m) {
        m.zero_grad();
        cross_entropy(m(x), y).backward();
    };
    const bool only = std::getenv("ONLY_COMPACT");
    const double dense = only ? 1 : median_cpu(steps, [&] { pass(*model); });
    const double thin = only ? 1 : median_cpu(steps, [&] { pass(*narrow); });
    nn::ChannelSubsetScope subsets(plan);
    const double compact = median_cpu(steps, [&] { pass(*model); });
    const double macs = subsets.cost().ratio();
    std::printf("%s keep %.2f%s batch %lld threads %d: CPU s per forward+backward: dense %.3f  narrow %.3f (%.2fx)  "
                "compact %.3f (%.2fx)  MACs %.3fx  compact GFLOP/s %.0f%% of dense\n",
                name.c_str(), keep, stream ? " (stream masks)" : "", static_cast<long long>(batch), num_threads(),
                dense, thin, dense / thin, compact, dense / compact, macs, only ? 0.0 : 100 * macs * dense / compact);
    return 0;
}
