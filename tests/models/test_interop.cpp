// tests/models/test_interop.cpp -- checkpoints interoperate with PyTorch in both directions.
//
// PyTorch -> razor, always: the committed fixture interop_resnet20_w4_state is exactly a PyTorch state_dict (PyTorch's
// init, BN running statistics from three train-mode batches, I64 num_batches_tracked of shape ()) of the resnet20
// layout at widths 4/8/16 (80 KB instead of resnet20's 1.1 MB; the same keys, blocks and option-A shortcuts),
// written by scripts/fixtures/ops_trajectory.py. It loads strict into razor's CifarResNet and must give PyTorch's
// eval-mode logits (interop_resnet20_w4_io, a float64 reference) within 1e-4 of their scale.
//
// With /usr/bin/python3 + torch present (skipped with a MESSAGE otherwise; the tests pass either way):
// - PyTorch -> razor at full size: scripts/check_interop.py --write-torch writes a resnet20 state_dict + logits;
//   razor's make_model("resnet20") loads it strict and must reproduce the logits.
// - razor -> PyTorch: razor writes its resnet20 checkpoint (save_safetensors(model.state_dict())) and eval-mode
//   logits to a temporary folder; scripts/check_interop.py loads the checkpoint strict into the PyTorch reference
//   model and compares logits (exit status 0 = agree within 1e-4).
// Agreement criterion: |razor - torch| <= 1e-4 (|torch| + max |torch|) per logit, as test_parity.cpp.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "models/registry.h"
#include "models/resnet.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {

const std::string kSourceDir = RAZOR_FIXTURE_DIR "/../..";
const std::string kScript = kSourceDir + "/scripts/check_interop.py";

double worst_error(const Tensor& got, const Tensor& ref) {
    REQUIRE(got.shape() == ref.shape());
    const std::vector<float> g = got.to_vector(), r = ref.to_vector();
    double scale = 0, worst = 0;
    for (float v : r) scale = std::max(scale, std::abs(double(v)));
    for (size_t i = 0; i < g.size(); ++i)
        worst = std::max(worst, std::abs(double(g[i]) - r[i]) / (std::abs(double(r[i])) + scale + 1e-30));
    return worst;
}

Tensor eval_logits(nn::Module& model, const Tensor& x) {
    NoGradGuard no_grad;
    model.eval();
    return model(x);
}

bool have_torch() {
    static const bool yes = std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
    return yes;
}

// A fresh folder under the temp directory, removed at scope exit.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& tag)
        : path(std::filesystem::temp_directory_path() / fmt("razor_", tag, "_", ::getpid())) {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

}  // namespace

TEST_CASE("interop: a PyTorch-written resnet20 (widths 4/8/16) state_dict loads into razor with PyTorch's logits") {
    const SafeTensors state = load_safetensors(RAZOR_FIXTURE_DIR "/interop_resnet20_w4_state.safetensors");
    const SafeTensors io = test::load_fixture("interop_resnet20_w4_io");
    Generator gen(5);
    models::CifarResNet model(3, {4, 8, 16}, models::Shortcut::A, 3, 10, gen);
    REQUIRE(state.tensors.size() == model.state_dict().size());
    model.load_state_dict(state.tensors);   // strict

    // The buffers came across, including PyTorch's I64 counter of shape ().
    const auto loaded = model.state_dict();
    CHECK(loaded.at("layer2.0.bn1.num_batches_tracked").to_vector_i64() == std::vector<int64_t>{3});
    CHECK(loaded.at("layer3.2.bn2.running_var").to_vector() ==
          state.tensors.at("layer3.2.bn2.running_var").to_vector());

    const double e = worst_error(eval_logits(model, io.tensors.at("input")), io.tensors.at("logits"));
    CHECK_MESSAGE(e <= 1e-4, "logits error ", e);
    MESSAGE("PyTorch resnet20 (widths 4/8/16) checkpoint: worst relative logits error ", e);
}

TEST_CASE("interop: a PyTorch-written full resnet20 state_dict loads into razor (needs torch)") {
    if (!have_torch()) {
        MESSAGE("skipped: /usr/bin/python3 with torch and numpy not found");
        return;
    }
    TempDir dir("interop_from_torch");
    const std::string cmd = fmt("/usr/bin/python3 ", kScript, " --write-torch ", dir.path.string(), " --model resnet20");
    INFO(cmd);
    REQUIRE(std::system(cmd.c_str()) == 0);
    const SafeTensors state = load_safetensors((dir.path / "torch_resnet20.safetensors").string());
    const SafeTensors io = load_safetensors((dir.path / "torch_resnet20.logits.safetensors").string());
    Generator gen(5);
    auto model = models::make_model("resnet20", 10, gen);
    model->load_state_dict(state.tensors);   // strict
    CHECK(model->state_dict().at("bn1.num_batches_tracked").to_vector_i64() == std::vector<int64_t>{3});
    const double e = worst_error(eval_logits(*model, io.tensors.at("input")), io.tensors.at("logits"));
    CHECK_MESSAGE(e <= 1e-4, "logits error ", e);
    MESSAGE("PyTorch resnet20 checkpoint: worst relative logits error ", e);
}

TEST_CASE("interop: razor's resnet20 checkpoint loads strict into the PyTorch reference (check_interop.py)") {
    // razor's own init, then BN running statistics from three train-mode batches, so every buffer matters.
    Generator gen(11);
    auto model = models::make_model("resnet20", 10, gen);
    {
        NoGradGuard no_grad;
        model->train();
        for (int i = 0; i < 3; ++i) (*model)(Tensor::randn({8, 3, 32, 32}, gen));
    }
    const Tensor x = Tensor::randn({4, 3, 32, 32}, gen);
    const Tensor logits = eval_logits(*model, x);

    TempDir dir("interop_to_torch");
    const std::string path = (dir.path / "model.safetensors").string();
    save_safetensors(path, model->state_dict(), {{"model", "resnet20"}});
    save_safetensors((dir.path / "model.logits.safetensors").string(), {{"input", x}, {"logits", logits}});
    // The files read back in razor as written (the checkpoint half of the round trip needs no torch).
    CHECK(load_safetensors(path).tensors.size() == model->state_dict().size());

    if (!have_torch()) {
        MESSAGE("skipped the PyTorch side: /usr/bin/python3 with torch and numpy not found");
        return;
    }
    const std::string cmd = fmt("/usr/bin/python3 ", kScript, " ", path);
    INFO(cmd);
    CHECK(std::system(cmd.c_str()) == 0);

    // The script must also fail when it should: a checkpoint that lacks a key does not load strict (exit 2).
    auto state = model->state_dict();
    state.erase("layer2.1.bn2.running_mean");
    save_safetensors(path, state, {{"model", "resnet20"}});
    const int rc = std::system((cmd + " 2>/dev/null").c_str());
    CHECK((WIFEXITED(rc) && WEXITSTATUS(rc) == 2));
}
