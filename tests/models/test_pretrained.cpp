// tests/models/test_pretrained.cpp -- a ViT's position embedding resized like timm's resize_pos_embedding
// (models/pos_embedding.h), architectures read off a file's keys, and a file's state fitted to a model
// (models/pretrained.h). Fixtures: tests/fixtures/pretrained/ (scripts/fixtures/make_pretrained_files.py):
// pos_embedding (torch.nn.functional.interpolate bicubic, align_corners=False), resnet18_tv.pth (torchvision's
// resnet18, 6 classes), vit_s_16_timm.pth (a 1-block ViT-S/16 at 224 px in timm's names, 5 classes).
#include "core/pytorch_file.h"
#include "models/imagenet_vit.h"
#include "models/pos_embedding.h"
#include "models/pretrained.h"
#include "models/registry.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {

const std::string kDir = std::string(RAZOR_FIXTURE_DIR) + "/pretrained/";

// A models_keys_* fixture (key -> [kind, index, *shape]) as a state dict of uninitialised tensors of those shapes.
std::map<std::string, Tensor> shapes_of(const std::string& fixture) {
    std::map<std::string, Tensor> out;
    for (const auto& [key, t] : test::load_fixture(fixture).tensors) {
        const std::vector<int64_t> v = t.to_vector_i64();
        out[key] = Tensor::empty(Shape(v.begin() + 2, v.end()));
    }
    return out;
}

std::map<std::string, Tensor> state_of(const std::string& model, int64_t classes, const models::ModelOptions& o = {}) {
    Generator gen(0);
    return models::make_model(model, classes, gen, o)->state_dict();
}

}  // namespace

TEST_CASE("pos_embedding: the patch grid resized as torch's bicubic interpolate (align_corners=False); class token kept") {
    const SafeTensors f = load_safetensors(kDir + "pos_embedding.safetensors");
    const Tensor& pos = f.tensors.at("pos");   // (1, 1 + 4*4, 6)
    for (int64_t grid : {3, 7}) {
        INFO("grid ", grid);
        const Tensor got = models::resize_pos_embedding(pos, grid, "test");
        test::check_close(got, f.tensors.at(fmt("grid", grid)), 1e-5, 1e-6, fmt("grid ", grid));
        const auto g = got.to_vector(), p = pos.to_vector();
        CHECK(std::equal(p.begin(), p.begin() + 6, g.begin()));   // the class token, bit for bit
    }
    test::check_close(models::resize_pos_embedding(pos, 4, "test"), pos, 1e-6, 1e-7, "same grid");
    CHECK_THROWS_WITH_AS(models::resize_pos_embedding(Tensor::zeros({1, 1 + 12, 6}), 3, "f.pth"),
                         doctest::Contains("f.pth: position embedding (1, 13, 6) cannot be resized"), Error);
}

TEST_CASE("identify_checkpoint: resnet18/34/50, mobilenet_v2, vit_b_16/vit_s_16 in every dialect, or why not") {
    const SafeTensors rn = load_pytorch(kDir + "resnet18_tv.pth");
    models::CheckpointArchitecture a = models::identify_checkpoint(rn.tensors);
    CHECK(a.model == "resnet18");
    CHECK(a.dialect == "torchvision");
    CHECK(a.num_classes == 6);
    CHECK(a.image_size == 0);
    CHECK(a.detail == "basic blocks 2-2-2-2");

    a = models::identify_checkpoint(load_pytorch(kDir + "vit_s_16_timm.pth").tensors);
    CHECK(a.model == "vit_s_16");
    CHECK(a.dialect == "timm");
    CHECK(a.depth == 1);
    CHECK(a.image_size == 224);
    CHECK(a.num_classes == 5);

    // PyTorch's own key lists and shapes (scripts/fixtures/ops_torchvision.py, 10 classes), as uninitialised tensors
    for (const char* name : {"resnet18", "resnet34", "resnet50", "mobilenet_v2", "vit_b_16", "vit_s_16"}) {
        INFO(name);
        a = models::identify_checkpoint(shapes_of(std::string("models_keys_") + name));
        CHECK(a.model == name);
        CHECK(a.num_classes == 10);
        CHECK(a.image_size == (a.model.rfind("vit", 0) == 0 ? 224 : 0));
    }
    // the dialects of a tiny torchvision ViT (width 4, not a zoo model: named in the detail only)
    const SafeTensors dialects = test::load_fixture("dialects_vit");
    for (const auto& [prefix, dialect] : std::vector<std::pair<std::string, std::string>>{
             {"tv.", "torchvision"}, {"timm.", "timm"}, {"hf.", "huggingface"}, {"dp.", "torchvision"}}) {
        INFO(prefix);
        std::map<std::string, Tensor> state;
        for (const auto& [k, t] : dialects.tensors)
            if (k.rfind(prefix, 0) == 0) state[k.substr(prefix.size())] = t;
        a = models::identify_checkpoint(state);
        CHECK(a.dialect == dialect);
        CHECK(a.model.empty());
        CHECK(a.detail.rfind("ViT width 4, patch ", 0) == 0);
        CHECK(a.depth == 2);
    }
    // nn.DataParallel's prefix is looked through
    std::map<std::string, Tensor> dp;
    for (const auto& [k, t] : rn.tensors) dp["module." + k] = t;
    CHECK(models::identify_checkpoint(dp).model == "resnet18");
    // not told: razor's CIFAR ResNet (no fc), a resnet18 with one block missing, an empty file
    CHECK(models::identify_checkpoint(state_of("resnet20", 10)).model.empty());
    std::map<std::string, Tensor> cut = rn.tensors;
    for (auto it = cut.begin(); it != cut.end();) it = it->first.rfind("layer4.1.", 0) == 0 ? cut.erase(it) : std::next(it);
    a = models::identify_checkpoint(cut);
    CHECK(a.model.empty());
    CHECK(a.detail == "basic blocks 2-2-2-1");
    CHECK(models::identify_checkpoint({}).model.empty());
}

TEST_CASE("fit_state: timm names renamed, position embedding resized to the model's grid, head fitted or not") {
    const auto file = load_pytorch(kDir + "vit_s_16_timm.pth").tensors;
    Generator gen(0);
    for (int64_t classes : {5, 3}) {
        INFO(classes, " classes");
        auto model = models::make_model("vit_s_16", classes, gen, {.image_size = 32, .depth = 1});
        const models::FittedState f = models::fit_state(file, *model, "heads.head", "vit.pth");
        CHECK(f.dialect == "timm");
        CHECK(f.complete());
        CHECK(f.resized == "position embedding 14x14 -> 2x2 (bicubic)");
        CHECK(f.file_head == Shape{5, 384});
        CHECK(f.head_fits == (classes == 5));
        CHECK(f.state.count("heads.head.weight") == (classes == 5 ? 1u : 0u));
        test::check_close(f.state.at("encoder.pos_embedding"),
                          models::resize_pos_embedding(file.at("pos_embed"), 2, "test"), 0, 0, "pos_embedding");
        CHECK(f.state.at("encoder.pos_embedding").shape() == Shape{1, 5, 384});
        CHECK(f.state.at("class_token").to_vector() == file.at("cls_token").to_vector());
    }
    // a depth-cut build leaves the registry's next vit_s_16 at its 12 blocks (the builder copies its config)
    CHECK(models::make_model("vit_s_16", 2, gen, {.image_size = 32})->state_dict().size() == 152);
}
