// models/vgg.cpp -- see vgg.h.
#include "models/vgg.h"

#include <algorithm>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/init.h"
#include "nn/layers.h"

namespace razor::models {

std::vector<int64_t> VGG::config16() {
    return {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
}
std::vector<int64_t> VGG::config19() {
    return {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0};
}

VGG::VGG(const std::vector<int64_t>& config_, int64_t C, int64_t classes, Generator& gen) : config(config_) {
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
    // features(x), with each BatchNorm2d + ReLU pair run as one fused op (BatchNorm2d::forward_relu); the ReLU
    // module is still reported to forward observers (razor info), with the fused result. Every activation is an
    // nn::ChannelTensor: all channels without a ChannelSubsetScope, the kept ones under one.
    const nn::ChannelTensor in = nn::ChannelTensor::all(x);
    nn::ChannelTensor h = features->call(in, [&] {
        const auto children = features->named_children();
        nn::ChannelTensor h = in;
        for (size_t i = 0; i < children.size(); ++i) {
            auto* bn = dynamic_cast<nn::BatchNorm2d*>(children[i].second.get());
            if (bn && i + 1 < children.size() && dynamic_cast<nn::ReLU*>(children[i + 1].second.get())) {
                h = bn->forward_relu(h);
                children[++i].second->call(h, [&] { return h; });
            } else {
                h = (*children[i].second)(h);
            }
        }
        return h;
    });
    h.x = flatten(h.x, 1);   // (N, |O|, 1, 1) -> (N, |O|)
    return nn::to_dense((*classifier)(h), classifier->out_features);   // (N, classes)
}

}  // namespace razor::models

// ---- channel plans: scored layers and extract (channel_plan.h) ----

namespace razor::models {

std::vector<int64_t> VGG::with_widths(const std::vector<int64_t>& config, const std::vector<int64_t>& widths) {
    std::vector<int64_t> out = config;
    size_t l = 0;
    for (int64_t& c : out)
        if (c != 0) {
            if (l >= widths.size()) break;
            if (widths[l] < 1) throw Error(fmt("VGG: width ", l, " is ", widths[l], "; every conv needs >= 1 channel"));
            c = widths[l++];
        }
    const size_t convs = static_cast<size_t>(std::count_if(config.begin(), config.end(), [](int64_t c) { return c != 0; }));
    if (widths.size() != convs)
        throw Error(fmt("VGG: expected ", convs, " widths (one per conv), got ", widths.size(),
                        "; hint: pass the widths razor sparse-train stored with the model"));
    return out;
}

std::vector<sparse::ScoredLayer> VGG::scored_layers() const {
    std::vector<sparse::ScoredLayer> layers;
    std::vector<std::string> input;
    for (const auto& [name, child] : features->named_children())
        if (auto* conv = dynamic_cast<nn::Conv2d*>(child.get())) {
            layers.push_back({"features." + name, conv->out_channels, true, input});
            input = {"features." + name};
        }
    layers.push_back({"classifier", classifier->out_features, false, input});
    return layers;
}

ChannelPrunable::Extracted VGG::extract(const ChannelPlan& plan) const {
    const auto layers = scored_layers();
    std::vector<int64_t> widths;
    for (size_t l = 0; l + 1 < layers.size(); ++l) widths.push_back(static_cast<int64_t>(plan.at(layers[l].name).size()));
    for (size_t l = 0; l < widths.size(); ++l)
        if (widths[l] == 0)
            throw Error(fmt("VGG::extract: ", layers[l].name, " keeps no channel; the subnetwork computes a constant "
                            "and has no dense form; hint: sample another subnetwork"));
    Generator gen(0);
    const int64_t C = dynamic_cast<const nn::Conv2d&>(*features->named_children()[0].second).in_channels;
    auto out = std::make_shared<VGG>(with_widths(config, widths), C, classifier->out_features, gen);
    NoGradGuard no_grad;
    const auto src = features->named_children(), dst = out->features->named_children();
    std::vector<int64_t> in(C);
    for (int64_t c = 0; c < C; ++c) in[c] = c;
    for (size_t i = 0; i < src.size(); ++i) {
        if (auto* conv = dynamic_cast<nn::Conv2d*>(src[i].second.get())) {
            auto& d = dynamic_cast<nn::Conv2d&>(*dst[i].second);
            const std::vector<int64_t>& kept = plan.at("features." + src[i].first);
            d.weight.detach().copy_(index_select(index_select(conv->weight, 0, nn::index_tensor(kept)), 1,
                                                 nn::index_tensor(in)));
            in = kept;
        } else if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(src[i].second.get())) {
            auto& d = dynamic_cast<nn::BatchNorm2d&>(*dst[i].second);
            const Tensor rows = nn::index_tensor(in);
            d.weight.detach().copy_(index_select(bn->weight, 0, rows));
            d.bias.detach().copy_(index_select(bn->bias, 0, rows));
            d.running_mean.detach().copy_(index_select(bn->running_mean, 0, rows));
            d.running_var.detach().copy_(index_select(bn->running_var, 0, rows));
            d.num_batches_tracked.detach().copy_(bn->num_batches_tracked);
        }
    }
    out->classifier->weight.detach().copy_(index_select(classifier->weight, 1, nn::index_tensor(in)));
    out->classifier->bias.detach().copy_(classifier->bias);
    out->train(is_training());
    return {out, widths};
}

}  // namespace razor::models
