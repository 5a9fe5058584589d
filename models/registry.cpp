// models/registry.cpp -- see registry.h.
#include "models/registry.h"

#include <functional>
#include <map>

#include "models/imagenet_resnet.h"
#include "models/imagenet_vit.h"
#include "models/lenet.h"
#include "models/mobilenet.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "models/vgg.h"
#include "models/vit.h"

namespace razor::models {
namespace {

using Builder = std::function<std::shared_ptr<nn::Module>(int64_t classes, Generator& gen, const ModelOptions& o)>;

// Families that only run on CIFAR-sized images refuse the rest here, with the name in the message.
void require_32(const std::string& name, const ModelOptions& o) {
    if (o.image_size != 32)
        throw Error(fmt("make_model(", name, "): needs 32x32 images, got ", o.image_size, "x", o.image_size,
                        "; hint: use mlp or lenet5 for 28x28 inputs"));
}

std::shared_ptr<nn::Module> resnet(int64_t n, std::array<int64_t, 3> w, Shortcut kind, const ModelOptions& o,
                                   int64_t classes, Generator& g) {
    if (o.widths.empty()) return std::make_shared<CifarResNet>(n, w, kind, o.in_channels, classes, g);
    return CifarResNet::from_widths(n, kind, o.in_channels, classes, o.widths, g);
}

// torchvision's ResNets take any image size (the stem and four strides leave at least 1x1 for S >= 1; the average pool
// is adaptive) and any number of input channels.
Builder imagenet_resnet(ImageNetResNetConfig config) {
    return [config](int64_t k, Generator& g, const ModelOptions& o) mutable {
        config.in_channels = o.in_channels;
        return std::make_shared<ImageNetResNet>(config, k, g);
    };
}

// torchvision's ViTs at the image size given (a multiple of the patch size) and depth (0 = the family's 12).
Builder imagenet_vit(ImageNetViTConfig config) {
    return [config](int64_t k, Generator& g, const ModelOptions& o) {
        ImageNetViTConfig c = config;   // a copy: the registry's builder is shared by every call
        c.image_size = o.image_size;
        c.in_channels = o.in_channels;
        if (o.depth > 0) c.num_layers = o.depth;
        return std::make_shared<ImageNetViT>(c, k, g);
    };
}

std::vector<int64_t> vgg_config(const std::vector<int64_t>& config, const ModelOptions& o) {
    return o.widths.empty() ? config : VGG::with_widths(config, o.widths);
}

const std::vector<std::pair<std::string, Builder>>& registry() {
    static const std::vector<std::pair<std::string, Builder>> r = {
        {"mlp",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             return mlp(o.in_channels * o.image_size * o.image_size, {1024, 1024}, k, g);
         }},
        {"lenet5",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             return std::make_shared<LeNet5>(o.in_channels, o.image_size, k, g);
         }},
        {"resnet20",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             return resnet(3, {16, 32, 64}, Shortcut::A, o, k, g);
         }},
        {"resnet32",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             return resnet(5, {16, 32, 64}, Shortcut::A, o, k, g);
         }},
        {"resnet56",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             return resnet(9, {16, 32, 64}, Shortcut::A, o, k, g);
         }},
        {"resnet32x2",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             return resnet(5, {32, 64, 128}, Shortcut::B, o, k, g);
         }},
        {"vgg16_bn",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             require_32("vgg16_bn", o);
             return std::make_shared<VGG>(vgg_config(VGG::config16(), o), o.in_channels, k, g);
         }},
        {"vgg19_bn",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             require_32("vgg19_bn", o);
             return std::make_shared<VGG>(vgg_config(VGG::config19(), o), o.in_channels, k, g);
         }},
        {"resnet18", imagenet_resnet(ImageNetResNetConfig::resnet18())},
        {"resnet34", imagenet_resnet(ImageNetResNetConfig::resnet34())},
        {"resnet50", imagenet_resnet(ImageNetResNetConfig::resnet50())},
        {"mobilenet_v2",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             return std::make_shared<MobileNetV2>(MobileNetV2Config{.in_channels = o.in_channels}, k, g);
         }},
        {"vit_b_16", imagenet_vit(ImageNetViTConfig::vit_b_16())},
        {"vit_s_16", imagenet_vit(ImageNetViTConfig::vit_s_16())},
        {"vit_tiny",
         [](int64_t k, Generator& g, const ModelOptions& o) {
             ViTConfig c;
             c.image_size = o.image_size;
             c.in_channels = o.in_channels;
             if (o.depth > 0) c.depth = o.depth;
             return std::make_shared<VisionTransformer>(c, k, g);
         }},
    };
    return r;
}

}  // namespace

const std::vector<std::string>& model_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const auto& [name, builder] : registry()) n.push_back(name);
        return n;
    }();
    return names;
}

std::string model_names_joined() {
    std::string joined;
    for (const auto& n : model_names()) joined += (joined.empty() ? "" : ", ") + n;
    return joined;
}

std::shared_ptr<nn::Module> make_model(const std::string& name, int64_t num_classes, Generator& gen,
                                       const ModelOptions& options) {
    const Builder* builder = nullptr;
    for (const auto& [n, b] : registry())
        if (n == name) builder = &b;
    if (!builder) {
        std::string valid;
        for (const auto& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
        throw Error(fmt("make_model: unknown model '", name, "'; valid names: ", valid));
    }
    if (num_classes < 1) throw Error(fmt("make_model(", name, "): num_classes must be >= 1, got ", num_classes));
    if (options.in_channels < 1 || options.image_size < 1)
        throw Error(fmt("make_model(", name, "): in_channels and image_size must be >= 1, got ", options.in_channels,
                        " and ", options.image_size));
    const bool is_vit = name == "vit_tiny" || name == "vit_b_16" || name == "vit_s_16";
    if (options.depth < 0 || (options.depth != 0 && !is_vit))
        throw Error(fmt("make_model(", name, "): depth ", options.depth,
                        " is not a setting of this model; hint: depth applies to the ViTs only (resnet depth is in "
                        "the name)"));
    if (!options.widths.empty() && (name == "mlp" || name == "lenet5" || is_vit || name == "resnet18" ||
                                    name == "resnet34" || name == "resnet50" || name == "mobilenet_v2"))
        throw Error(fmt("make_model(", name, "): widths are a setting of the CIFAR resnets and vggs only (sparse-train "
                        "subnetworks), got ", options.widths.size(), " values"));
    return (*builder)(num_classes, gen, options);
}

}  // namespace razor::models
