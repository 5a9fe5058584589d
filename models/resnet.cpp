// models/resnet.cpp -- see resnet.h.
#include "models/resnet.h"

#include "nn/init.h"

namespace razor::models {
namespace {
const nn::Conv2dConfig conv3x3(int64_t stride) { return {.kernel_size = 3, .stride = stride, .padding = 1, .bias = false}; }

// The recipe's init: N(0, 2 / fan_in) for every conv and Linear weight below `m` (children are built with
// PyTorch's default init first; this redraws the weights, as model.apply(_weights_init) does in PyTorch).
void kaiming_init(nn::Module& m, Generator& gen) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(&m)) nn::init::kaiming_normal_(conv->weight, gen);
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) nn::init::kaiming_normal_(lin->weight, gen);
    for (auto& [name, child] : m.named_children()) kaiming_init(*child, gen);
}
}  // namespace

PadShortcut::PadShortcut(int64_t in, int64_t out, int64_t s) : in_channels(in), out_channels(out), stride(s) {
    if (out < in || (out - in) % 2 != 0)
        throw Error(fmt("PadShortcut: out_channels ", out, " must be in_channels ", in, " plus an even number; hint: "
                        "option-A shortcuts pad (out - in) / 2 zero channels on each side"));
}

Tensor PadShortcut::forward(const Tensor& x) {
    // x: (N, in, H, W) -> subsampled (N, in, ceil(H/s), ceil(W/s)), a strided view
    const Tensor sub = slice(slice(x, 2, 0, x.size(2), stride), 3, 0, x.size(3), stride);
    const int64_t pad = (out_channels - in_channels) / 2;
    if (pad == 0) return sub;
    const Tensor zeros = Tensor::zeros({x.size(0), pad, sub.size(2), sub.size(3)});
    return concat({zeros, sub, zeros}, 1);   // (N, out, H/s, W/s); the zeros get no gradient
}

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride, Shortcut kind, Generator& gen) {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(in, out, conv3x3(stride), gen));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(out));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(out, out, conv3x3(1), gen));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out));
    if (stride != 1 || in != out) {
        if (kind == Shortcut::A) {
            shortcut = register_module("shortcut", std::make_shared<PadShortcut>(in, out, stride));
        } else {
            auto seq = std::make_shared<nn::Sequential>();
            seq->add(std::make_shared<nn::Conv2d>(in, out, nn::Conv2dConfig{.kernel_size = 1, .stride = stride, .bias = false}, gen));
            seq->add(std::make_shared<nn::BatchNorm2d>(out));
            shortcut = register_module("shortcut", seq);
        }
    }
}

Tensor BasicBlock::forward(const Tensor& x) {
    Tensor h = relu((*bn1)((*conv1)(x)));               // (N, out, H/s, W/s)
    h = (*bn2)((*conv2)(h));
    return relu(add(h, shortcut ? (*shortcut)(x) : x));  // the residual add, then ReLU
}

CifarResNet::CifarResNet(int64_t n, std::array<int64_t, 3> w, Shortcut kind, int64_t C, int64_t classes,
                         Generator& gen) {
    if (n < 1) throw Error(fmt("CifarResNet: blocks_per_stage must be >= 1, got ", n));
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(C, w[0], conv3x3(1), gen));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(w[0]));
    int64_t in = w[0];
    std::shared_ptr<nn::Sequential>* stages[3] = {&layer1, &layer2, &layer3};
    for (int s = 0; s < 3; ++s) {
        auto stage = std::make_shared<nn::Sequential>();
        for (int64_t b = 0; b < n; ++b) {
            stage->add(std::make_shared<BasicBlock>(in, w[s], b == 0 && s > 0 ? 2 : 1, kind, gen));
            in = w[s];
        }
        *stages[s] = register_module("layer" + std::to_string(s + 1), stage);
    }
    linear = register_module("linear", std::make_shared<nn::Linear>(w[2], classes, true, gen));
    kaiming_init(*this, gen);
}

Tensor CifarResNet::forward(const Tensor& x) {
    Tensor h = relu((*bn1)((*conv1)(x)));                  // (N, w0, H, W)
    h = (*layer3)((*layer2)((*layer1)(h)));                // (N, w2, H/4, W/4)
    h = flatten(adaptive_avg_pool2d(h, {1, 1}), 1);        // (N, w2): global average pool
    return (*linear)(h);                                   // (N, classes)
}

}  // namespace razor::models
