// tests/fuzz/fuzz_train_state.cpp -- libFuzzer target: bytes -> a resumed run's train state (train/train_state.h).
//
// Byte 0 picks the optimizer (bits 0-1: SGD with Nesterov momentum, plain SGD, Adam, AdamW) and the lr schedule
// (bits 2-4: onecycle, cosine, step, multistep, none; bit 5: a linear warm-up in front); the rest is the
// train_state.safetensors file. The model is a Linear(2, 3)'s parameters, "fc.weight" and "fc.bias", as in the
// seeds. What razor train --resume does with the file is done here: parse_safetensors, parse_run_config on the
// "config" metadata, restore_train_state into the optimizer, scheduler and generators. On accepted state the
// optimizer's state_dict must round-trip, and an optimizer and a scheduler step must not crash.
#include <memory>

#include "train/train_state.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "fuzz_support.h"
#include "optim/adam.h"
#include "optim/scheduler.h"
#include "optim/sgd.h"

namespace {
using namespace razor;

std::unique_ptr<optim::Optimizer> make_optimizer(int kind, const optim::NamedParameters& params) {
    switch (kind) {
        case 0:
            return std::make_unique<optim::SGD>(params,
                                                optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
        case 1: return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1});
        case 2: return std::make_unique<optim::Adam>(params, optim::AdamOptions{});
        default: return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{});
    }
}

std::unique_ptr<optim::LRScheduler> make_scheduler(int kind, bool warmup, optim::Optimizer& opt) {
    constexpr int64_t total = 100, warm = 10;
    std::unique_ptr<optim::LRScheduler> after;
    switch (kind % 5) {
        case 0: {
            optim::OneCycleOptions o;
            o.max_lr = {0.1};
            o.total_steps = total;
            o.cycle_momentum = false;
            return std::make_unique<optim::OneCycleLR>(opt, o);
        }
        case 1: after = std::make_unique<optim::CosineAnnealingLR>(opt, total - warm); break;
        case 2: after = std::make_unique<optim::StepLR>(opt, 30, 0.1); break;
        case 3: after = std::make_unique<optim::MultiStepLR>(opt, std::vector<int64_t>{30, 60}, 0.1); break;
        default: break;
    }
    if (warmup) return std::make_unique<optim::LinearWarmup>(opt, warm, 0.1, std::move(after));
    return after;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const int opt_kind = data[0] & 3, sched_kind = (data[0] >> 2) & 7;
    const bool warmup = (data[0] >> 5) & 1;
    const std::string file = "train_state.safetensors";
    SafeTensors st;
    if (!fuzz::accepts([&] { st = parse_safetensors(fuzz::bytes(data + 1, size - 1), file); })) return 0;
    if (auto it = st.metadata.find("config"); it != st.metadata.end())
        fuzz::accepts([&] { (void)train::parse_run_config(it->second, file); });

    const optim::NamedParameters params = {{"fc.weight", Tensor::zeros({3, 2}).requires_grad_()},
                                           {"fc.bias", Tensor::zeros({3}).requires_grad_()}};
    auto opt = make_optimizer(opt_kind, params);
    auto sched = make_scheduler(sched_kind, warmup, *opt);
    Generator gen(1);
    train::ResumePoint p;
    if (!fuzz::accepts([&] { p = train::restore_train_state(st.tensors, file, *opt, sched.get(), gen); })) return 0;
    fuzz::require(p.epoch >= 0 && p.step >= 0 && p.best_epoch >= 0 && p.best_epoch <= p.epoch, "resume point in range");

    // The restored optimizer state round-trips into a fresh optimizer of the same kind...
    auto fresh = make_optimizer(opt_kind, params);
    fuzz::require(fuzz::accepts([&] { fresh->load_state_dict(opt->state_dict()); }), "optimizer state round-trips");
    // ...and steps on unit gradients, or refuses with an Error: an Adam state holding a step count without its
    // moments is refused at the first step by design (optim/optimizer.h), and a schedule refuses to step past its end.
    for (const auto& [name, t] : params) t.set_grad(Tensor::ones(t.shape()));
    fuzz::accepts([&] { opt->step(); });
    if (sched) fuzz::accepts([&] { sched->step(); });
    return 0;
}
