// tests/optim/test_updates.cpp -- SGD, Adam and AdamW replay PyTorch 1.13's updates step for step.
//
// Fixture optim_updates (scripts/fixtures/ops_optim.py): per config, 10 steps on three parameters in two groups
// with different options, a fixed gradient sequence, and steps where b or c has no gradient (so Adam's
// per-parameter step counts diverge, also within a group). Every parameter is compared after every step within 1e-6 relative
// (float32) -- and, on FMA machines (x86-64 with FMA, aarch64) with glibc, bit for bit (see optim/fma.h).
#include <bit>
#include <cstring>
#include <memory>

#include "optim/adam.h"
#include "optim/sgd.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {

const char* kConfigs[] = {"sgd_plain",  "sgd_momentum", "sgd_nesterov", "sgd_wd",           "adam_plain",
                          "adam_wd",    "adam_amsgrad", "adamw_plain",  "adamw_default_wd", "adamw_amsgrad"};
const char* kParams[] = {"a", "b", "c"};

// Row k of a (K, ...) fixture tensor, as a tensor of the trailing shape.
Tensor row(const Tensor& t, int64_t k) {
    Shape shape(t.shape().begin() + 1, t.shape().end());
    const int64_t n = shape_numel(shape);
    Tensor out = Tensor::empty(shape, t.dtype());
    std::memcpy(out.data<float>(), t.contiguous().data<float>() + k * n, static_cast<size_t>(n) * sizeof(float));
    return out;
}

std::unique_ptr<optim::Optimizer> make(const std::string& config, const optim::NamedParameters& g0,
                                       const optim::NamedParameters& g1) {
    if (config.rfind("sgd_", 0) == 0) return std::make_unique<optim::SGD>(std::vector<optim::ParamGroup<optim::SGDOptions>>{{g0, {}}, {g1, {}}});
    if (config.rfind("adamw_", 0) == 0) return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup<optim::AdamWOptions>>{{g0, {}}, {g1, {}}});
    return std::make_unique<optim::Adam>(std::vector<optim::ParamGroup<optim::AdamOptions>>{{g0, {}}, {g1, {}}});
}

}  // namespace

TEST_CASE("optimizers: 10 steps match torch.optim for every config (two groups, missing gradients)") {
    SafeTensors fx = load_fixture("optim_updates");
    const auto& t = fx.tensors;
    int64_t bit_differences = 0;
    for (std::string config : kConfigs) {
        CAPTURE(config);
        std::map<std::string, Tensor> p;
        for (const char* name : kParams) p[name] = leaf(row(t.at(config + ".params." + name), 0));
        auto opt = make(config, {{"a", p["a"]}, {"b", p["b"]}}, {{"c", p["c"]}});
        // The group options travel in the fixture as param_groups.<g>.<field> entries, loaded as a checkpoint.
        std::map<std::string, Tensor> options;
        const std::string prefix = config + ".opt.";
        for (const auto& [key, value] : t)
            if (key.rfind(prefix, 0) == 0) options["param_groups." + key.substr(prefix.size())] = value;
        REQUIRE(options.size() == 2 * opt->option_names().size());
        opt->load_state_dict(options);
        for (int64_t k = 0; k < 10; ++k) {
            for (const char* name : kParams) {
                const bool has = t.at(config + ".has_grad." + name).i64()[k] != 0;
                if (has) p[name].set_grad(row(t.at(config + ".grads." + name), k));
                else p[name].zero_grad();
            }
            opt->step();
            for (const char* name : kParams) {
                const Tensor want = row(t.at(config + ".params." + name), k + 1);
                check_close(p[name], want, 1e-6, 1e-7, fmt(config, " step ", k + 1, " param ", name));
                const auto got_v = p[name].to_vector(), want_v = want.to_vector();
                for (size_t i = 0; i < got_v.size(); ++i)
                    bit_differences += std::bit_cast<uint32_t>(got_v[i]) != std::bit_cast<uint32_t>(want_v[i]);
            }
        }
        // b and c skipped two steps each: their own step counts are 8, a's is 10 (Adam keeps one per parameter).
        if (config.rfind("adam", 0) == 0) {
            auto state = opt->state_dict();
            CHECK(state.at("a.step").i64()[0] == 10);
            CHECK(state.at("b.step").i64()[0] == 8);
            CHECK(state.at("c.step").i64()[0] == 8);
        }
    }
#if (defined(__FMA__) || defined(__ARM_FEATURE_FMA)) && defined(__GLIBC__)
    // With fused multiply-adds where PyTorch's AVX2 kernels fuse, and the same libm pow/sqrt as Python's, every
    // value is bit-identical to the fixture (written on Debian 12, x86-64; also under qemu-aarch64). Elsewhere 1e-6
    // is the contract.
    CHECK_MESSAGE(bit_differences == 0, bit_differences << " parameter values differ from PyTorch in some bit");
#endif
}
