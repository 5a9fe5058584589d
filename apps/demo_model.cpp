// apps/demo_model.cpp -- see demo_model.h.
#include "apps/demo_model.h"

#include "core/check.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/sequential.h"

namespace razor::apps {

bool is_demo_model(const std::string& name) { return name == "demo-cnn" || name == "demo-mlp"; }

std::shared_ptr<nn::Module> make_demo_model(const std::string& name, int64_t classes, int64_t in_channels,
                                            int64_t image_size, int64_t hidden, Generator& gen) {
    auto model = std::make_shared<nn::Sequential>();
    if (name == "demo-cnn") {
        if (image_size % 4 != 0 || image_size < 4)
            throw Error(fmt("demo-cnn: expected an image size divisible by 4 (two 2x2 pools), got ", image_size,
                            "; hint: the demo trains on 28x28 Fashion-MNIST"));
        const nn::Conv2dConfig conv3x3{.kernel_size = 3, .padding = 1, .bias = false};
        model->add(std::make_shared<nn::Conv2d>(in_channels, 32, conv3x3, gen));
        model->add(std::make_shared<nn::BatchNorm2d>(32));
        model->add(std::make_shared<nn::ReLU>());
        model->add(std::make_shared<nn::MaxPool2d>(2));
        model->add(std::make_shared<nn::Conv2d>(32, 64, conv3x3, gen));
        model->add(std::make_shared<nn::BatchNorm2d>(64));
        model->add(std::make_shared<nn::ReLU>());
        model->add(std::make_shared<nn::MaxPool2d>(2));
        model->add(std::make_shared<nn::Flatten>());
        model->add(std::make_shared<nn::Linear>(64 * (image_size / 4) * (image_size / 4), classes, true, gen));
    } else if (name == "demo-mlp") {
        if (hidden < 1) throw Error(fmt("demo-mlp: expected a hidden width >= 1, got ", hidden));
        model->add(std::make_shared<nn::Flatten>());
        model->add(std::make_shared<nn::Linear>(in_channels * image_size * image_size, hidden, true, gen));
        model->add(std::make_shared<nn::ReLU>());
        model->add(std::make_shared<nn::Linear>(hidden, classes, true, gen));
    } else {
        throw Error(fmt("razor demo: unknown demo model '", name, "'; expected demo-cnn or demo-mlp"));
    }
    return model;
}

int64_t demo_hidden(const std::map<std::string, std::string>& metadata, int64_t fallback) {
    auto it = metadata.find("hidden");
    if (it == metadata.end() || it->second.empty()) return fallback;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (*end != '\0' || v < 1)
        throw Error(fmt("checkpoint metadata hidden: expected a positive integer, got '", it->second,
                        "'; hint: the metadata was edited or damaged"));
    return v;
}

}  // namespace razor::apps
