// models/channel_plan.cpp -- see channel_plan.h.
#include "models/channel_plan.h"

namespace razor::models {

ChannelPlan ChannelPlan::from_masks(const std::vector<sparse::ScoredLayer>& layers, const sparse::ChannelMasks& masks) {
    if (masks.kept.size() != layers.size())
        throw Error(fmt("ChannelPlan::from_masks: expected ", layers.size(), " kept-channel lists (one per scored "
                        "layer), got ", masks.kept.size(), "; hint: sample the masks from this model's ChannelScores"));
    ChannelPlan p;
    for (size_t l = 0; l < layers.size(); ++l) p.keep(layers[l].name, masks.kept[l].to_vector_i64());
    return p;
}

ChannelPlan ChannelPlan::dense(const std::vector<sparse::ScoredLayer>& layers) {
    ChannelPlan p;
    for (const auto& l : layers) p.keep(l.name, nn::iota_channels(l.channels));
    return p;
}

ChannelPrunable& channel_prunable(nn::Module& model) {
    auto* p = dynamic_cast<ChannelPrunable*>(&model);
    if (!p)
        throw Error(fmt("channel_prunable: ", model.type_name(), " cannot run compact channel subsets; hint: VR-PGE "
                        "supports the CIFAR ResNets (resnet20/32/56/32x2) and VGGs (vgg16_bn, vgg19_bn)"));
    return *p;
}

}  // namespace razor::models
