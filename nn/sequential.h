// nn/sequential.h -- Sequential: children called in order; names "0", "1", ...   reference: torch.nn.Sequential
#pragma once

#include "nn/layers.h"
#include "nn/module.h"

namespace razor::nn {

class Sequential : public Module {
public:
    Sequential() = default;
    template <class M>
    std::shared_ptr<M> add(std::shared_ptr<M> module) {
        return register_module(std::to_string(size_++), std::move(module));
    }
    // A named child, as nn.Sequential(OrderedDict(...)) (torchvision's ViT: "encoder_layer_0", "head").
    template <class M>
    std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> module) {
        ++size_;
        return register_module(name, std::move(module));
    }
    // Each child's output is given up to the next child, so a child may write over it. The Sequential's own input is
    // kept until the call returns: letting it go after the first child (a forward_consuming override) left the peak
    // tensor bytes as they were and changed the order of frees, after which mobilenet_v2's 224-px step at batch 32
    // held 288 MiB of allocator free space at its peak instead of 141 MiB (peak RSS 575 -> 723 MiB; docs/ops.md).
    Tensor forward(const Tensor& x) override {
        Tensor h = x;
        for (auto& [name, child] : named_children()) h = (*child)(std::move(h));
        return h;
    }
    ChannelTensor forward_subset(const ChannelTensor& x) override {
        ChannelTensor h = x;
        for (auto& [name, child] : named_children()) h = (*child)(h);
        return h;
    }
    std::string type_name() const override { return "Sequential"; }

private:
    int size_ = 0;
};

}  // namespace razor::nn
