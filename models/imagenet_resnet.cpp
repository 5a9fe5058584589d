// models/imagenet_resnet.cpp -- see imagenet_resnet.h.
#include "models/imagenet_resnet.h"

#include "nn/init.h"

namespace razor::models {
namespace {

std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, Generator& gen) {
    auto c = std::make_shared<nn::Conv2d>(
        in, out, nn::Conv2dConfig{.kernel_size = kernel, .stride = stride, .padding = kernel / 2, .bias = false}, gen);
    nn::init::kaiming_normal_(c->weight, gen, /*mode_fan_out=*/true);   // torchvision: mode="fan_out", ReLU gain
    return c;
}

}  // namespace

ImageNetResNetBlock::ImageNetResNetBlock(ResNetBlock k, int64_t in, int64_t planes, int64_t stride, Generator& gen)
    : kind(k) {
    const int64_t out = planes * expansion(k);
    if (k == ResNetBlock::Basic) {
        conv1 = register_module("conv1", conv(in, planes, 3, stride, gen));
        bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
        conv2 = register_module("conv2", conv(planes, planes, 3, 1, gen));
        bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
    } else {   // v1.5: the stride on the 3x3
        conv1 = register_module("conv1", conv(in, planes, 1, 1, gen));
        bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
        conv2 = register_module("conv2", conv(planes, planes, 3, stride, gen));
        bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
        conv3 = register_module("conv3", conv(planes, out, 1, 1, gen));
        bn3 = register_module("bn3", std::make_shared<nn::BatchNorm2d>(out));
    }
    if (stride != 1 || in != out) {
        auto seq = std::make_shared<nn::Sequential>();
        seq->add(conv(in, out, 1, stride, gen));
        seq->add(std::make_shared<nn::BatchNorm2d>(out));
        downsample = register_module("downsample", seq);
    }
}

Tensor ImageNetResNetBlock::forward(const Tensor& x) {
    Tensor h = bn1->forward_relu((*conv1)(x));                    // (N, planes, H/s or H, ...)
    if (kind == ResNetBlock::Basic) h = (*bn2)((*conv2)(h));     // (N, planes, H/s, W/s)
    else h = (*bn3)((*conv3)(bn2->forward_relu((*conv2)(h))));   // (N, 4 planes, H/s, W/s)
    // The residual add, then ReLU (one fused op), written over h: torchvision's `out += identity; out = relu(out)`.
    return add_relu(std::move(h), downsample ? (*downsample)(x) : x);
}

ImageNetResNet::ImageNetResNet(const ImageNetResNetConfig& c, int64_t classes, Generator& gen) : config(c) {
    for (int s = 0; s < 4; ++s)
        if (c.layers[s] < 1 || c.planes[s] < 1)
            throw Error(fmt("ResNet: stage ", s + 1, " needs >= 1 block of >= 1 plane, got ", c.layers[s], " blocks of ",
                            c.planes[s], "; hint: resnet18 is layers {2, 2, 2, 2}, planes {64, 128, 256, 512}"));
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(
                                         c.in_channels, c.planes[0],
                                         nn::Conv2dConfig{.kernel_size = 7, .stride = 2, .padding = 3, .bias = false}, gen));
    nn::init::kaiming_normal_(conv1->weight, gen, /*mode_fan_out=*/true);
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(c.planes[0]));
    maxpool = register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));
    int64_t in = c.planes[0];
    std::shared_ptr<nn::Sequential>* stages[4] = {&layer1, &layer2, &layer3, &layer4};
    for (int s = 0; s < 4; ++s) {
        auto stage = std::make_shared<nn::Sequential>();
        for (int64_t b = 0; b < c.layers[s]; ++b) {
            auto block = std::make_shared<ImageNetResNetBlock>(c.block, in, c.planes[s], b == 0 && s > 0 ? 2 : 1, gen);
            if (c.zero_init_residual) (c.block == ResNetBlock::Basic ? block->bn2 : block->bn3)->weight.detach().zero_();
            stage->add(block);
            in = c.planes[s] * ImageNetResNetBlock::expansion(c.block);
        }
        *stages[s] = register_module("layer" + std::to_string(s + 1), stage);
    }
    avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
    fc = register_module("fc", std::make_shared<nn::Linear>(in, classes, true, gen));
}

Tensor ImageNetResNet::forward(const Tensor& x) {
    Tensor h = (*maxpool)(bn1->forward_relu((*conv1)(x)));          // (N, 64, S/4, S/4)
    h = (*layer4)((*layer3)((*layer2)((*layer1)(h))));             // (N, 512 e, S/32, S/32)
    return (*fc)(flatten((*avgpool)(h), 1));                       // (N, classes)
}

}  // namespace razor::models
