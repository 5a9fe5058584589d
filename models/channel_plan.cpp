// models/channel_plan.cpp -- see channel_plan.h.
#include "models/channel_plan.h"

#include <algorithm>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/linear.h"

namespace razor::models {

namespace {

bool is_all(const std::vector<int64_t>& idx, int64_t n) { return static_cast<int64_t>(idx.size()) == n; }

// The positions of `sub` (sorted) inside `set` (sorted, a superset).
std::vector<int64_t> positions_in(const std::vector<int64_t>& sub, const std::vector<int64_t>& set) {
    std::vector<int64_t> pos;
    pos.reserve(sub.size());
    size_t j = 0;
    for (int64_t c : sub) {
        while (j < set.size() && set[j] < c) ++j;
        pos.push_back(static_cast<int64_t>(j++));
    }
    return pos;
}

// Out positions of a conv: (N, OC, OH, OW) for x (N, C, H, W).
Shape conv_out_shape(const nn::Conv2d& conv, const Shape& x, int64_t oc) {
    const auto& c = conv.config;
    const int64_t k = c.dilation * (c.kernel_size - 1) + 1;
    return {x[0], oc, (x[2] + 2 * c.padding - k) / c.stride + 1, (x[3] + 2 * c.padding - k) / c.stride + 1};
}

}  // namespace

ChannelPlan ChannelPlan::from_masks(const sparse::ChannelMasks& masks) {
    ChannelPlan p;
    for (const Tensor& k : masks.kept) p.kept.push_back(k.to_vector_i64());
    return p;
}

ChannelPlan ChannelPlan::dense(const std::vector<sparse::ScoredLayer>& layers) {
    ChannelPlan p;
    for (const auto& l : layers) {
        std::vector<int64_t> all(l.channels);
        for (int64_t c = 0; c < l.channels; ++c) all[c] = c;
        p.kept.push_back(std::move(all));
    }
    return p;
}

void ChannelPrunable::set_channel_plan(std::shared_ptr<const ChannelPlan> plan) {
    if (plan) {
        const auto layers = scored_layers();
        if (plan->kept.size() != layers.size())
            throw Error(fmt("set_channel_plan: expected ", layers.size(), " kept-channel lists (one per scored layer), "
                            "got ", plan->kept.size(), "; hint: build the plan from this model's scored_layers()"));
        for (size_t l = 0; l < layers.size(); ++l) {
            const auto& k = plan->kept[l];
            for (size_t i = 0; i < k.size(); ++i)
                if (k[i] < 0 || k[i] >= layers[l].channels || (i > 0 && k[i] <= k[i - 1]))
                    throw Error(fmt("set_channel_plan: the kept channels of ", layers[l].name, " must be distinct, "
                                    "ascending and in [0, ", layers[l].channels, "); entry ", i, " is ", k[i]));
            if (!layers[l].masked && !is_all(k, layers[l].channels))
                throw Error(fmt("set_channel_plan: ", layers[l].name, " is not masked and must keep all ",
                                layers[l].channels, " channels, got ", k.size()));
        }
    }
    plan_ = std::move(plan);
}

ChannelPrunable& channel_prunable(nn::Module& model) {
    auto* p = dynamic_cast<ChannelPrunable*>(&model);
    if (!p)
        throw Error(fmt("channel_prunable: ", model.type_name(), " cannot run compact channel subsets; hint: VR-PGE "
                        "supports the CIFAR ResNets (resnet20/32/56/32x2) and VGGs (vgg16_bn, vgg19_bn)"));
    return *p;
}

Tensor index_tensor(const std::vector<int64_t>& idx) {
    return Tensor::from_vector_i64({static_cast<int64_t>(idx.size())}, idx);
}

Compact compact_all(const Tensor& x) {
    Compact c{x, std::vector<int64_t>(x.size(1))};
    for (int64_t i = 0; i < x.size(1); ++i) c.idx[i] = i;
    return c;
}

Compact compact_conv(const nn::Conv2d& conv, const Compact& x, const std::vector<int64_t>& out, PlanCost& cost) {
    if (conv.config.groups != 1)
        throw Error(fmt("compact_conv(", conv.name(), "): grouped convs are not supported (groups ", conv.config.groups,
                        ")"));
    const int64_t O = static_cast<int64_t>(out.size()), I = static_cast<int64_t>(x.idx.size());
    const Shape ys = conv_out_shape(conv, x.x.shape(), O);
    const int64_t k2 = conv.config.kernel_size * conv.config.kernel_size, ohw = ys[2] * ys[3];
    cost.macs += O * I * k2 * ohw;
    cost.dense_macs += conv.out_channels * conv.in_channels * k2 * ohw;
    // Nothing kept, or nothing to read: the dense masked network computes zeros here (bias-free convs; a bias would
    // add b[out], handled below).
    if (O == 0 || I == 0) {
        Tensor y = Tensor::zeros(ys);
        if (O > 0 && conv.bias.defined()) {
            const Tensor b = index_select(conv.bias, 0, index_tensor(out));
            y = add(y, reshape(b, {1, O, 1, 1}));
        }
        return {y, out};
    }
    Tensor W = conv.weight;   // (OC, C, K, K)
    if (!is_all(out, conv.out_channels)) W = index_select(W, 0, index_tensor(out));     // (O, C, K, K)
    if (!is_all(x.idx, conv.in_channels)) W = index_select(W, 1, index_tensor(x.idx));  // (O, I, K, K)
    Tensor b;
    if (conv.bias.defined()) b = is_all(out, conv.out_channels) ? conv.bias : index_select(conv.bias, 0, index_tensor(out));
    Conv2dOptions o;
    o.stride = {conv.config.stride, conv.config.stride};
    o.padding = {conv.config.padding, conv.config.padding};
    o.dilation = {conv.config.dilation, conv.config.dilation};
    return {conv2d(x.x, W, b, o), out};   // (N, O, OH, OW)
}

namespace {
Compact compact_bn(nn::BatchNorm2d& bn, const Compact& x, bool relu) {
    if (is_all(x.idx, bn.num_features)) return {relu ? bn.forward_relu(x.x) : bn(x.x), x.idx};   // the module itself
    if (x.idx.empty()) return x;
    const Tensor idx = index_tensor(x.idx);
    Tensor weight, bias, running_mean, running_var;
    if (bn.weight.defined()) weight = index_select(bn.weight, 0, idx), bias = index_select(bn.bias, 0, idx);
    {
        NoGradGuard no_grad;
        running_mean = index_select(bn.running_mean, 0, idx);
        running_var = index_select(bn.running_var, 0, idx);
    }
    const bool training = bn.is_training();
    if (training) {
        ++bn.num_batches_tracked.i64()[0];
        bn.num_batches_tracked.bump_version();
    }
    Tensor y = (relu ? batch_norm_relu : batch_norm)(x.x, weight, bias, running_mean, running_var, training,
                                                     bn.momentum, bn.eps);
    if (training) {
        // Write the kept channels' updated statistics back; the dropped channels' stay as they were.
        float* rm = bn.running_mean.f32();
        float* rv = bn.running_var.f32();
        const float* m = running_mean.f32();
        const float* v = running_var.f32();
        for (size_t i = 0; i < x.idx.size(); ++i) rm[x.idx[i]] = m[i], rv[x.idx[i]] = v[i];
        bn.running_mean.bump_version();
        bn.running_var.bump_version();
    }
    return {y, x.idx};
}
}  // namespace

Compact compact_batch_norm(nn::BatchNorm2d& bn, const Compact& x) { return compact_bn(bn, x, false); }
Compact compact_batch_norm_relu(nn::BatchNorm2d& bn, const Compact& x) { return compact_bn(bn, x, true); }

Compact compact_relu(const Compact& x) {
    if (x.x.numel() == 0) return x;
    return {relu(x.x), x.idx};
}

Compact compact_add(const Compact& a, const Compact& b) {
    if (b.idx.empty()) return a;
    if (a.idx.empty()) return b;
    if (a.idx == b.idx) return {add(a.x, b.x), a.idx};
    std::vector<int64_t> u;
    std::set_union(a.idx.begin(), a.idx.end(), b.idx.begin(), b.idx.end(), std::back_inserter(u));
    // The stream (a) usually already holds every channel of the branch (b): one scatter-add of b into a.
    if (u == a.idx) return {index_add(a.x, 1, index_tensor(positions_in(b.idx, u)), b.x), u};
    if (u == b.idx) return {index_add(b.x, 1, index_tensor(positions_in(a.idx, u)), a.x), u};
    Shape s = a.x.shape();
    s[1] = static_cast<int64_t>(u.size());
    Tensor y = index_add(Tensor::zeros(s), 1, index_tensor(positions_in(a.idx, u)), a.x);
    return {index_add(y, 1, index_tensor(positions_in(b.idx, u)), b.x), u};
}

Tensor compact_linear(const nn::Linear& linear, const Compact& x, PlanCost& cost) {
    const int64_t I = static_cast<int64_t>(x.idx.size());
    cost.macs += I * linear.out_features;
    cost.dense_macs += linear.in_features * linear.out_features;
    if (I == 0) {
        Tensor y = Tensor::zeros({x.x.size(0), linear.out_features});
        return linear.bias.defined() ? add(y, linear.bias) : y;
    }
    if (is_all(x.idx, linear.in_features)) return razor::linear(x.x, linear.weight, linear.bias);
    return razor::linear(x.x, index_select(linear.weight, 1, index_tensor(x.idx)), linear.bias);
}

}  // namespace razor::models
