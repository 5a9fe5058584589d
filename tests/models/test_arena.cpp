// tests/models/test_arena.cpp -- the caching allocator as an activation arena: after three warm-up training steps,
// a step takes no tensor block from the OS (core/allocator.h; the page-fault figures are in docs/bench-ops.md).
#include "models/registry.h"
#include "optim/sgd.h"
#include "support/gradcheck.h"

using namespace razor;

TEST_CASE("arena: after three warm-up steps, a training step allocates nothing from the OS; accounting is exact" *
          doctest::test_suite("model-scale")) {
    for (std::string name : {"resnet20", "vgg16_bn"}) {
        CAPTURE(name);
        Generator gen(3);
        auto model = models::make_model(name, 10, gen);
        optim::SGD opt(model->named_parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4});
        const Tensor x = Tensor::randn({4, 3, 32, 32}, gen);
        const Tensor labels = Tensor::from_vector_i64({4}, {1, 7, 0, 3});
        auto step = [&] {
            opt.zero_grad();
            Tensor loss = cross_entropy((*model)(x), labels);
            loss.backward();
            opt.step();
        };
        // Warm-up, three steps: the first takes activations and gradients from the OS, and its SGD momentum buffers
        // (created in opt.step, after backward) take cached memory, so the second step's activations need some
        // more; where freed memory lands decides what later requests can reuse (allocator.h), so a third step is
        // allowed to settle. From then on, every step is served from the cache.
        step();
        step();
        step();
        std::vector<MemoryStats> after;
        for (int s = 0; s < 2; ++s) {
            const MemoryStats before = memory_stats();
            reset_peak_memory();
            step();
            after.push_back(memory_stats());
            CHECK(after.back().os_allocations == before.os_allocations);   // every block came from the cache
            CHECK(after.back().allocations > before.allocations + 100);    // ... and there were many
            CHECK(after.back().live_bytes == before.live_bytes);           // the step leaves nothing behind
            CHECK(after.back().os_bytes == before.os_bytes);
        }
        CHECK(after[0].peak_bytes == after[1].peak_bytes);   // the same tensors live at the same time each step
    }
}
