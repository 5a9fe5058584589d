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
    Tensor forward(const Tensor& x) override { return run(x); }
    // The same, and the first child may overwrite x too: the caller gave it up.
    Tensor forward_consuming(Tensor&& x) override { return run(std::move(x)); }
    ChannelTensor forward_subset(const ChannelTensor& x) override {
        ChannelTensor h = x;
        for (auto& [name, child] : named_children()) h = (*child)(h);
        return h;
    }
    std::string type_name() const override { return "Sequential"; }

private:
    Tensor run(Tensor h) {
        // Each child's output is only the next child's input: given up (std::move), so a child may overwrite it.
        for (auto& [name, child] : named_children()) h = (*child)(std::move(h));
        return h;
    }

    int size_ = 0;
};

}  // namespace razor::nn
