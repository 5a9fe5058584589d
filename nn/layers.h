// nn/layers.h -- parameter-free layers as modules (so they appear in Sequential, state paths and the tape report):
// ReLU, ReLU6, GELU, Flatten, Dropout, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d.
//
// reference: the torch.nn modules of the same names.
// ReLU and MaxPool2d also run on a channel subset (nn/channel_subset.h): per channel, the channel list unchanged.
#pragma once

#include "nn/module.h"

namespace razor::nn {

class ReLU : public Module {
public:
    Tensor forward(const Tensor& x) override { return relu(x); }
    ChannelTensor forward_subset(const ChannelTensor& x) override {
        return {x.x.numel() ? relu(x.x) : x.x, x.channels};
    }
    std::string type_name() const override { return "ReLU"; }
};

class ReLU6 : public Module {
public:
    Tensor forward(const Tensor& x) override { return relu6(x); }
    Tensor forward_consuming(Tensor&& x) override { return relu6(std::move(x)); }   // y over x: only a mask is saved
    std::string type_name() const override { return "ReLU6"; }
};

class GELU : public Module {
public:
    Tensor forward(const Tensor& x) override { return gelu(x); }
    Tensor forward_consuming(Tensor&& x) override { return gelu(std::move(x)); }   // y over x where the tape allows
    std::string type_name() const override { return "GELU"; }
};

class Flatten : public Module {
public:
    explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
    Tensor forward(const Tensor& x) override { return flatten(x, start_, end_); }
    std::string type_name() const override { return "Flatten"; }

private:
    int64_t start_, end_;
};

// Inverted dropout in train(); identity in eval(). Masks come from `gen` (the default generator unless given).
class Dropout : public Module {
public:
    explicit Dropout(float p = 0.5f, Generator& gen = default_generator()) : p_(p), gen_(&gen) {
        if (p < 0.f || p > 1.f) throw Error(fmt("Dropout: p must be in [0, 1], got ", p));
    }
    Tensor forward(const Tensor& x) override { return dropout(x, p_, is_training(), *gen_); }
    std::string type_name() const override { return "Dropout"; }

private:
    float p_;
    Generator* gen_;
};

class MaxPool2d : public Module {
public:
    explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
        : options_{{kernel, kernel}, {stride, stride}, {padding, padding}} {}
    Tensor forward(const Tensor& x) override { return max_pool2d(x, options_); }
    ChannelTensor forward_subset(const ChannelTensor& x) override {
        if (!x.channels.empty()) return {max_pool2d(x.x, options_), x.channels};
        auto out = [&](size_t d) {   // no channel: (N, 0, OH, OW) without running the op
            const int64_t s = options_.stride[d] ? options_.stride[d] : options_.kernel[d];
            return (x.x.size(static_cast<int64_t>(2 + d)) + 2 * options_.padding[d] - options_.kernel[d]) / s + 1;
        };
        return {Tensor::zeros({x.x.size(0), 0, out(0), out(1)}), x.channels};
    }
    std::string type_name() const override { return "MaxPool2d"; }

private:
    Pool2dOptions options_;
};

class AvgPool2d : public Module {
public:
    explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
        : options_{{kernel, kernel}, {stride, stride}, {padding, padding}} {}
    Tensor forward(const Tensor& x) override { return avg_pool2d(x, options_); }
    std::string type_name() const override { return "AvgPool2d"; }

private:
    Pool2dOptions options_;
};

class AdaptiveAvgPool2d : public Module {
public:
    explicit AdaptiveAvgPool2d(int64_t output_size) : size_{output_size, output_size} {}
    Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, size_); }
    std::string type_name() const override { return "AdaptiveAvgPool2d"; }

private:
    std::array<int64_t, 2> size_;
};

// Mean cross-entropy of logits (N, C) against class indices (N), optional label smoothing.
class CrossEntropyLoss {
public:
    explicit CrossEntropyLoss(float label_smoothing = 0.f) : label_smoothing_(label_smoothing) {}
    Tensor operator()(const Tensor& logits, const Tensor& target) const {
        return cross_entropy(logits, target, label_smoothing_);
    }

private:
    float label_smoothing_;
};

}  // namespace razor::nn
