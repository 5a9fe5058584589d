// tests/sparse/test_forward_release.cpp -- the autograd graph keeps only what the tape saves: after a whole model's
// forward, the tensor bytes still alive are the output we hold plus the tape's stored bytes, nothing more. So every
// dense forward output is released as soon as its last consumer ran, unless the tape keeps it (the dense policy
// keeps a saved tensor by reference; Back Razor keeps a smaller copy and lets the dense one go).
#include <doctest/doctest.h>

#include "models/registry.h"
#include "sparse/back_razor.h"

using namespace razor;
using namespace razor::sparse;

TEST_CASE("forward release: after a resnet20 / vit_tiny forward, live tensor bytes = the logits + the tape's stored bytes") {
    RazorConfig bn_int8;
    bn_int8.batch_norm = BatchNormSave::ChannelI8;
    RazorConfig bn_f16;
    bn_f16.batch_norm = BatchNormSave::DenseF16;
    const std::vector<std::pair<std::string, std::shared_ptr<const SavePolicy>>> policies = {
        {"dense", std::make_shared<DenseSavePolicy>()},
        {"razor r=0.9 (BN inputs dense)", std::make_shared<RazorSavePolicy>()},
        {"razor r=0.9, BN inputs int8", std::make_shared<RazorSavePolicy>(bn_int8)},
        {"razor r=0.9, BN inputs f16", std::make_shared<RazorSavePolicy>(bn_f16)}};
    for (const std::string name : {"resnet20", "vit_tiny"}) {
        for (const auto& [what, policy] : policies) {
            INFO(name << ", " << what);
            Generator gen(5);
            auto model = models::make_model(name, 10, gen);
            const Tensor x = Tensor::randn({2, 3, 32, 32}, gen);   // no grad: the first conv saves a copy, or x itself
            TapeScope scope;
            const int64_t before = memory_stats().live_bytes;
            Tensor logits;
            {
                SavePolicyGuard guard(policy);
                logits = (*model)(x);
            }
            const TapeTotals tape = scope.tape().live();
            int64_t held = static_cast<int64_t>(logits.nbytes());
            // The dense tape may keep x itself (by reference): those bytes were alive before the forward.
            for (const SavedRecord& r : scope.tape().records())
                if (r.op == "conv2d" && r.name == "x" && r.format == "dense" && r.shape == x.shape())
                    held -= static_cast<int64_t>(x.nbytes());
            MESSAGE(name << ", " << what << ": tape " << tape.stored_bytes << " B, live growth "
                         << memory_stats().live_bytes - before << " B");
            CHECK(memory_stats().live_bytes - before == tape.stored_bytes + held);
            sum(logits).backward();
            CHECK(scope.tape().live().stored_bytes == 0);
        }
    }
}
