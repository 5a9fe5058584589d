// tests/models/test_dialects.cpp -- timm's and Hugging Face's ViT key names, and nn.DataParallel's prefix, renamed
// into torchvision's (models/dialects.h); unknown files refused with the nearest expected names. Fixture:
// dialects_vit (scripts/fixtures/ops_torchvision.py), a tiny torchvision ViT's state dict under each dialect.
#include <cstring>

#include "models/dialects.h"
#include "models/imagenet_vit.h"
#include "models/registry.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {

std::map<std::string, Tensor> with_prefix(const SafeTensors& f, const std::string& prefix) {
    std::map<std::string, Tensor> out;
    for (const auto& [k, t] : f.tensors)
        if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = t;
    return out;
}

models::ImageNetViT tiny_vit() {
    models::ImageNetViTConfig c{.image_size = 16, .hidden_dim = 4, .num_layers = 2, .num_heads = 2, .mlp_dim = 8};
    Generator gen(0);
    return models::ImageNetViT(c, 10, gen);
}

}  // namespace

TEST_CASE("dialects: timm, Hugging Face and DataParallel ViT files rename to torchvision's keys, tensor for tensor") {
    const SafeTensors f = test::load_fixture("dialects_vit");
    const auto tv = with_prefix(f, "tv.");
    models::ImageNetViT model = tiny_vit();
    REQUIRE(tv.size() == model.state_dict().size());
    for (const auto& [prefix, dialect] : std::vector<std::pair<std::string, std::string>>{
             {"tv.", "torchvision"}, {"timm.", "timm"}, {"hf.", "huggingface"}, {"dp.", "torchvision"}}) {
        INFO(prefix);
        const models::RenamedState r = models::to_model_keys(with_prefix(f, prefix), model, prefix + "safetensors");
        CHECK(r.dialect == dialect);
        REQUIRE(r.state.size() == tv.size());
        for (const auto& [key, t] : tv) {
            INFO(key);
            REQUIRE(r.state.count(key));
            const Tensor& got = r.state.at(key);
            CHECK(got.shape() == t.shape());
            CHECK(std::memcmp(got.contiguous().f32(), t.contiguous().f32(), t.nbytes()) == 0);
        }
        model.load_state_dict(r.state);   // strict: every key, every shape
    }
}

TEST_CASE("dialects: a file of another model is refused, listing unmatched keys with the nearest expected names") {
    models::ImageNetViT model = tiny_vit();
    Generator gen(0);
    const auto resnet = models::make_model("resnet18", 10, gen, {.image_size = 64})->state_dict();
    CHECK_THROWS_WITH_AS(models::to_model_keys(resnet, model, "resnet18.pth"),
                         doctest::Contains("resnet18.pth: its keys match 0 of the model's"), Error);
    CHECK_THROWS_WITH_AS(models::to_model_keys(resnet, model, "resnet18.pth"),
                         doctest::Contains("'bn1.bias' (nearest expected: '"), Error);
    CHECK(models::nearest_key("blocks.0.norm1.weight", {"class_token", "encoder.layers.encoder_layer_0.ln_1.weight",
                                                        "blocks.0.norm1.bias"}) == "blocks.0.norm1.bias");
    // Hugging Face's q without k and v
    std::map<std::string, Tensor> partial = with_prefix(test::load_fixture("dialects_vit"), "hf.");
    partial.erase("vit.encoder.layer.1.attention.attention.key.weight");
    CHECK_THROWS_WITH_AS(models::to_model_keys(partial, model, "hf.bin"), doctest::Contains("has no k part"), Error);
}
