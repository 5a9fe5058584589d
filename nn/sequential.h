// nn/sequential.h -- Sequential: children called in order; names "0", "1", ...   reference: torch.nn.Sequential
#pragma once

#include "nn/module.h"

namespace razor::nn {

class Sequential : public Module {
public:
    Sequential() = default;
    template <class M>
    std::shared_ptr<M> add(std::shared_ptr<M> module) {
        return register_module(std::to_string(size_++), std::move(module));
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = x;
        for (auto& [name, child] : named_children()) h = (*child)(h);
        return h;
    }
    std::string type_name() const override { return "Sequential"; }

private:
    int size_ = 0;
};

// Parameter-free layers as modules, so they appear in Sequential and in the tape report.
class ReLU : public Module {
public:
    Tensor forward(const Tensor& x) override { return relu(x); }
    std::string type_name() const override { return "ReLU"; }
};

class Flatten : public Module {
public:
    explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
    Tensor forward(const Tensor& x) override { return flatten(x, start_, end_); }
    std::string type_name() const override { return "Flatten"; }

private:
    int64_t start_, end_;
};

}  // namespace razor::nn
