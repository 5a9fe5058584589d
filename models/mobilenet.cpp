// models/mobilenet.cpp -- see mobilenet.h.
#include "models/mobilenet.h"

#include <cmath>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"

namespace razor::models {
namespace {

// torchvision's Conv2dNormActivation with ReLU6: [Conv2d (bias-free, padding (k-1)/2), BatchNorm2d, ReLU6].
std::shared_ptr<nn::Sequential> conv_bn_relu6(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups,
                                              Generator& gen) {
    auto seq = std::make_shared<nn::Sequential>();
    auto conv = seq->add(std::make_shared<nn::Conv2d>(
        in, out, nn::Conv2dConfig{.kernel_size = kernel, .stride = stride, .padding = (kernel - 1) / 2, .groups = groups,
                                  .bias = false},
        gen));
    nn::init::kaiming_normal_(conv->weight, gen, /*mode_fan_out=*/true);
    seq->add(std::make_shared<nn::BatchNorm2d>(out));
    seq->add(std::make_shared<nn::ReLU6>());
    return seq;
}

}  // namespace

int64_t make_divisible(double v, int64_t divisor) {
    int64_t rounded = std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
    if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
    return rounded;
}

InvertedResidual::InvertedResidual(int64_t in, int64_t out, int64_t stride, int64_t t, Generator& gen)
    : use_res_connect(stride == 1 && in == out) {
    const int64_t hidden = static_cast<int64_t>(std::llround(static_cast<double>(in * t)));
    conv = register_module("conv", std::make_shared<nn::Sequential>());
    if (t != 1) conv->add(conv_bn_relu6(in, hidden, 1, 1, 1, gen));           // expand
    conv->add(conv_bn_relu6(hidden, hidden, 3, stride, hidden, gen));         // depthwise
    auto project = conv->add(std::make_shared<nn::Conv2d>(hidden, out, nn::Conv2dConfig{.kernel_size = 1, .bias = false}, gen));
    nn::init::kaiming_normal_(project->weight, gen, /*mode_fan_out=*/true);
    conv->add(std::make_shared<nn::BatchNorm2d>(out));                        // linear bottleneck: no activation
}

Tensor InvertedResidual::forward(const Tensor& x) {
    return use_res_connect ? add(x, (*conv)(x)) : (*conv)(x);   // (N, out, H/s, W/s)
}

MobileNetV2::MobileNetV2(const MobileNetV2Config& c, int64_t classes, Generator& gen) : config(c) {
    if (!(c.width_mult > 0) || c.dropout < 0.f || c.dropout > 1.f)
        throw Error(fmt("MobileNetV2: width_mult must be > 0 and dropout in [0, 1], got ", c.width_mult, " and ",
                        c.dropout, "; hint: torchvision's mobilenet_v2 is width 1.0, dropout 0.2"));
    struct Setting {
        int64_t t, c, n, s;
    };
    const Setting settings[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2},  {6, 64, 4, 2},
                                {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    int64_t in = make_divisible(32 * c.width_mult);
    const int64_t last = make_divisible(1280 * std::max(1.0, c.width_mult));
    features = register_module("features", std::make_shared<nn::Sequential>());
    features->add(conv_bn_relu6(c.in_channels, in, 3, 2, 1, gen));
    for (const Setting& s : settings) {
        const int64_t out = make_divisible(static_cast<double>(s.c) * c.width_mult);
        for (int64_t i = 0; i < s.n; ++i) {
            features->add(std::make_shared<InvertedResidual>(in, out, i == 0 ? s.s : 1, s.t, gen));
            in = out;
        }
    }
    features->add(conv_bn_relu6(in, last, 1, 1, 1, gen));
    classifier = register_module("classifier", std::make_shared<nn::Sequential>());
    classifier->add(std::make_shared<nn::Dropout>(c.dropout));
    auto fc = classifier->add(std::make_shared<nn::Linear>(last, classes, true, gen));
    nn::init::normal_(fc->weight, 0.f, 0.01f, gen);
    fc->bias.detach().zero_();
}

Tensor MobileNetV2::forward(const Tensor& x) {
    const Tensor h = (*features)(x);                                       // (N, 1280, S/32, S/32)
    return (*classifier)(flatten(adaptive_avg_pool2d(h, {1, 1}), 1));      // (N, classes)
}

}  // namespace razor::models
