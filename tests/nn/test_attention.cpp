// tests/nn/test_attention.cpp -- MultiheadAttention and TransformerBlock: PyTorch parity (output, input and every
// parameter gradient), init, errors, an input gradcheck, and what the attention keeps on the tape.
#include <cmath>

#include "nn/attention.h"
#include "nn/transformer.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {

// Loads "<prefix>.param.<key>" into the module, runs x through it, backpropagates grad_out, and compares the
// output, grad_x and "<prefix>.grad.<key>" for every parameter. The reference is float64 (ops_models.py);
// tolerance 1e-4 relative plus 1e-5 absolute (the values are O(1)).
void check_against_torch(nn::Module& m, const std::string& prefix) {
    const SafeTensors f = test::load_fixture("models_attention");
    const auto& ref = f.tensors;
    std::map<std::string, Tensor> state;
    const std::string param = prefix + ".param.";
    for (const auto& [key, t] : ref)
        if (key.rfind(param, 0) == 0) state[key.substr(param.size())] = t;
    m.load_state_dict(state);   // strict: the keys are torch's, one for one

    Tensor x = test::leaf(ref.at(prefix + ".x"));
    Tensor y = m(x);
    y.backward(ref.at(prefix + ".grad_out"));
    test::check_close(y, ref.at(prefix + ".out"), 1e-4, 1e-5, prefix + " out");
    test::check_close(x.grad(), ref.at(prefix + ".grad_x"), 1e-4, 1e-5, prefix + " grad_x");
    int64_t checked = 0;
    for (const auto& [key, p] : m.named_parameters()) {
        test::check_close(p.grad(), ref.at(prefix + ".grad." + key), 1e-4, 1e-5, prefix + " grad " + key);
        ++checked;
    }
    CHECK(checked == static_cast<int64_t>(state.size()));
}

}  // namespace

TEST_CASE("MultiheadAttention: matches torch.nn.MultiheadAttention (output, grad_x, every parameter gradient)") {
    nn::MultiheadAttention mha(8, 2);
    std::vector<std::string> keys;
    for (const auto& [key, p] : mha.named_parameters()) keys.push_back(key);
    CHECK(keys == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
    check_against_torch(mha, "mha");

    nn::MultiheadAttention nobias(6, 3, /*bias=*/false);
    CHECK(nobias.named_parameters().size() == 2);
    check_against_torch(nobias, "mha_nobias");
}

TEST_CASE("TransformerBlock: matches the PyTorch pre-norm block with the same names") {
    nn::TransformerBlock block(8, 2);
    check_against_torch(block, "block");
    CHECK(block.fc1->out_features == 32);
}

TEST_CASE("MultiheadAttention: PyTorch's init (xavier in_proj, zero biases, Linear default out_proj)") {
    Generator gen(3);
    nn::MultiheadAttention mha(64, 4, true, gen);
    const float xavier = std::sqrt(6.f / (64 + 3 * 64)), linear = 1.f / std::sqrt(64.f);
    float wmax = 0, omax = 0;
    double w2 = 0;
    for (float v : mha.in_proj_weight.to_vector()) wmax = std::max(wmax, std::abs(v)), w2 += double(v) * v;
    for (float v : mha.out_proj->weight.to_vector()) omax = std::max(omax, std::abs(v));
    CHECK(wmax <= xavier);
    CHECK(wmax > 0.95f * xavier);
    CHECK(w2 / mha.in_proj_weight.numel() == doctest::Approx(xavier * xavier / 3).epsilon(0.05));   // U(-a, a): a^2/3
    CHECK(omax <= linear);
    CHECK(omax > 0.95f * linear);
    for (float v : mha.in_proj_bias.to_vector()) CHECK(v == 0.f);
    for (float v : mha.out_proj->bias.to_vector()) CHECK(v == 0.f);
}

TEST_CASE("MultiheadAttention: input gradcheck; errors name the module and both shapes") {
    Generator gen(4);
    nn::MultiheadAttention mha(4, 2, true, gen);
    test::gradcheck("multihead_attention", [&](const std::vector<Tensor>& in) { return mha(in[0]); },
                    {test::randn_leaf({2, 3, 4}, 11)});

    CHECK_THROWS_WITH_AS(nn::MultiheadAttention(10, 3), doctest::Contains("embed_dim 10 must be a positive multiple of "
                                                                          "num_heads 3"),
                         Error);
    CHECK_THROWS_WITH_AS(mha(Tensor::zeros({2, 3, 5})), doctest::Contains("expected input (B, N, 4), got (2, 3, 5)"),
                         Error);
    CHECK_THROWS_WITH_AS(mha(Tensor::zeros({3, 4})), doctest::Contains("got (3, 4)"), Error);
    nn::TransformerBlock block(4, 2);
    CHECK_THROWS_WITH_AS(block(Tensor::zeros({1, 2, 8})), doctest::Contains("TransformerBlock"), Error);
}

TEST_CASE("MultiheadAttention: the tape keeps x, q, k, v, P and the head output, nothing else (not qkv whole)") {
    nn::MultiheadAttention mha(8, 2);
    const int64_t B = 2, N = 5, D = 8, h = 2;
    Tensor x = Tensor::ones({B, N, D});
    Tensor y = mha(x);
    int64_t bytes = 0, softmax_items = 0;
    for (const auto& r : current_tape().records()) {
        bytes += r.stored_bytes;
        if (r.op == "softmax") {
            ++softmax_items;
            CHECK(r.shape == Shape{B, h, N, N});
        }
    }
    CHECK(softmax_items == 1);
    // x (in_proj input), q, k, v (B, h, N, d) each, P (B, h, N, N), head output (out_proj input). k and v are
    // packed copies: were they views of qkv, the dense tape would hold qkv's (B, N, 3D) buffer whole.
    CHECK(bytes == 4 * (B * N * D + 3 * B * N * D + B * h * N * N + B * N * D));
    y.backward(Tensor::ones(y.shape()));
    CHECK(current_tape().live().items == 0);
}
