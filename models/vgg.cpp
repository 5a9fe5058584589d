// models/vgg.cpp -- see vgg.h.
#include "models/vgg.h"

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/init.h"

namespace razor::models {

std::vector<int64_t> VGG::config16() {
    return {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
}
std::vector<int64_t> VGG::config19() {
    return {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0};
}

VGG::VGG(const std::vector<int64_t>& config, int64_t C, int64_t classes, Generator& gen) {
    features = register_module("features", std::make_shared<nn::Sequential>());
    int64_t in = C;
    for (int64_t out : config) {
        if (out == 0) {
            features->add(std::make_shared<nn::MaxPool2d>(2));
            continue;
        }
        auto conv = features->add(
            std::make_shared<nn::Conv2d>(in, out, nn::Conv2dConfig{.kernel_size = 3, .padding = 1, .bias = false}, gen));
        nn::init::kaiming_normal_(conv->weight, gen, /*mode_fan_out=*/true);
        features->add(std::make_shared<nn::BatchNorm2d>(out));
        features->add(std::make_shared<nn::ReLU>());
        in = out;
    }
    classifier = register_module("classifier", std::make_shared<nn::Linear>(in, classes, true, gen));
    nn::init::normal_(classifier->weight, 0.f, 0.01f, gen);
    classifier->bias.detach().zero_();
}

Tensor VGG::forward(const Tensor& x) {
    if (x.dim() != 4 || x.size(2) != 32 || x.size(3) != 32)
        throw Error(fmt("VGG(", name(), "): expected input (N, C, 32, 32), got ", shape_str(x.shape()),
                        "; hint: the CIFAR VGG's five pools need 32x32 images"));
    return (*classifier)(flatten((*features)(x), 1));   // (N, 512, 1, 1) -> (N, 512) -> (N, classes)
}

}  // namespace razor::models
