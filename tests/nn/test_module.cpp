// tests/nn/test_module.cpp -- Module naming, state_dict round trip, strict-load errors, train/eval, attribution.
#include "nn/linear.h"
#include "nn/sequential.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {
struct Block : nn::Module {
    Block() {
        fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
        register_buffer("steps", Tensor::zeros({1}));
    }
    Tensor forward(const Tensor& x) override { return relu((*fc)(x)); }
    std::shared_ptr<nn::Linear> fc;
};
}  // namespace

TEST_CASE("Module: PyTorch-style names, parameters and buffers") {
    nn::Sequential model;
    model.add(std::make_shared<Block>());
    model.add(std::make_shared<nn::Linear>(3, 2, false));
    std::vector<std::string> names;
    for (auto& [name, t] : model.named_parameters()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"0.fc.weight", "0.fc.bias", "1.weight"});
    CHECK(model.num_parameters() == 4 * 3 + 3 + 3 * 2);
    auto sd = model.state_dict();
    CHECK(sd.count("0.steps") == 1);
    CHECK(sd.size() == 4);
}

TEST_CASE("Module: state_dict round trip through safetensors, strict errors list every problem") {
    Generator g1(1), g2(2);
    auto a = std::make_shared<nn::Linear>(5, 3, true, g1);
    auto b = std::make_shared<nn::Linear>(5, 3, true, g2);
    const std::string path = "/tmp/razor_module_test.safetensors";
    save_safetensors(path, a->state_dict());
    b->load_state_dict(load_safetensors(path).tensors);
    CHECK(b->weight.to_vector() == a->weight.to_vector());

    auto wrong = std::make_shared<nn::Linear>(5, 4);
    try {
        wrong->load_state_dict({{"weight", Tensor::zeros({3, 5})}, {"extra", Tensor::zeros({1})}});
        FAIL("expected an error");
    } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find("missing keys (1):\n    bias") != std::string::npos);
        CHECK(msg.find("unexpected keys (1):\n    extra") != std::string::npos);
        CHECK(msg.find("weight: expected (4, 5) f32, got (3, 5) f32") != std::string::npos);
    }
}

TEST_CASE("Module: train/eval propagates; forward attributes the tape to module paths") {
    nn::Sequential model;
    auto block = model.add(std::make_shared<Block>());
    model.eval();
    CHECK_FALSE(block->fc->is_training());
    model.train();
    CHECK(block->fc->is_training());
    Tensor y = model(Tensor::ones({2, 4}));
    bool found = false;
    for (const auto& r : current_tape().records()) found |= r.module_path == "0.fc" && r.op == "linear";
    CHECK(found);
    y.backward(Tensor::ones(y.shape()));
    CHECK(current_tape().live().items == 0);
}

TEST_CASE("Linear: a wrong input width names the layer and both sizes") {
    nn::Sequential model;
    model.add(std::make_shared<nn::Linear>(8, 2));
    CHECK_THROWS_WITH_AS(model(Tensor::ones({3, 7})), doctest::Contains("Linear(0): expected input (..., 8), got (3, 7)"),
                         Error);
}
