// models/resnet.cpp -- see resnet.h.
#include "models/resnet.h"

#include <algorithm>
#include <iterator>

#include "nn/init.h"

namespace razor::models {
namespace {
const nn::Conv2dConfig conv3x3(int64_t stride) { return {.kernel_size = 3, .stride = stride, .padding = 1, .bias = false}; }

// The recipe's init: N(0, 2 / fan_in) for every conv and Linear weight below `m` (children are built with
// PyTorch's default init first; this redraws the weights, as model.apply(_weights_init) does in PyTorch).
void kaiming_init(nn::Module& m, Generator& gen) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(&m)) nn::init::kaiming_normal_(conv->weight, gen);
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) nn::init::kaiming_normal_(lin->weight, gen);
    for (auto& [name, child] : m.named_children()) kaiming_init(*child, gen);
}
}  // namespace

PadShortcut::PadShortcut(int64_t in, int64_t out, int64_t s) : in_channels(in), out_channels(out), stride(s) {
    if (out < in || (out - in) % 2 != 0)
        throw Error(fmt("PadShortcut: out_channels ", out, " must be in_channels ", in, " plus an even number; hint: "
                        "option-A shortcuts pad (out - in) / 2 zero channels on each side"));
}

Tensor PadShortcut::forward(const Tensor& x) {
    // x: (N, in, H, W) -> subsampled (N, in, ceil(H/s), ceil(W/s)), a strided view
    const Tensor sub = slice(slice(x, 2, 0, x.size(2), stride), 3, 0, x.size(3), stride);
    const int64_t pad = (out_channels - in_channels) / 2;
    if (pad == 0) return sub;
    const Tensor zeros = Tensor::zeros({x.size(0), pad, sub.size(2), sub.size(3)});
    return concat({zeros, sub, zeros}, 1);   // (N, out, H/s, W/s); the zeros get no gradient
}

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride, Shortcut kind, Generator& gen, int64_t mid) {
    if (mid == 0) mid = out;
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(in, mid, conv3x3(stride), gen));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(mid));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(mid, out, conv3x3(1), gen));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out));
    if (stride != 1 || in != out) {
        if (kind == Shortcut::A) {
            shortcut = register_module("shortcut", std::make_shared<PadShortcut>(in, out, stride));
        } else {
            auto seq = std::make_shared<nn::Sequential>();
            seq->add(std::make_shared<nn::Conv2d>(in, out, nn::Conv2dConfig{.kernel_size = 1, .stride = stride, .bias = false}, gen));
            seq->add(std::make_shared<nn::BatchNorm2d>(out));
            shortcut = register_module("shortcut", seq);
        }
    }
}

nn::ChannelTensor PadShortcut::forward_subset(const nn::ChannelTensor& x) {
    if (static_cast<int64_t>(x.channels.size()) == in_channels) return {forward(x.x), nn::iota_channels(out_channels)};
    nn::check_channels(x, in_channels, 1, fmt("PadShortcut(", name(), ")"));
    nn::ChannelTensor y{slice(slice(x.x, 2, 0, x.x.size(2), stride), 3, 0, x.x.size(3), stride), x.channels};
    for (int64_t& c : y.channels) c += (out_channels - in_channels) / 2;
    return y;
}

Tensor BasicBlock::forward(const Tensor& x) {
    return nn::to_dense(forward_subset(nn::ChannelTensor::all(x)), conv2->out_channels);
}

nn::ChannelTensor BasicBlock::forward_subset(const nn::ChannelTensor& x) {
    nn::ChannelTensor h = bn1->forward_relu((*conv1)(x));   // (N, |O1|, H/s, W/s): relu(bn1(.)) fused
    h = (*bn2)((*conv2)(h));                                // (N, |O2|, H/s, W/s)
    return nn::add_relu(h, shortcut ? (*shortcut)(x) : x);  // the residual add, then ReLU (one fused op when dense)
}

CifarResNet::CifarResNet(int64_t n, std::array<int64_t, 3> w, Shortcut kind, int64_t C, int64_t classes,
                         Generator& gen, std::vector<int64_t> mid)
    : blocks_per_stage(n), shortcut_kind(kind) {
    if (n < 1) throw Error(fmt("CifarResNet: blocks_per_stage must be >= 1, got ", n));
    if (!mid.empty() && static_cast<int64_t>(mid.size()) != 3 * n)
        throw Error(fmt("CifarResNet: expected ", 3 * n, " mid_widths (one per block), got ", mid.size()));
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(C, w[0], conv3x3(1), gen));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(w[0]));
    int64_t in = w[0];
    std::shared_ptr<nn::Sequential>* stages[3] = {&layer1, &layer2, &layer3};
    for (int s = 0; s < 3; ++s) {
        auto stage = std::make_shared<nn::Sequential>();
        for (int64_t b = 0; b < n; ++b) {
            stage->add(std::make_shared<BasicBlock>(in, w[s], b == 0 && s > 0 ? 2 : 1, kind, gen,
                                                    mid.empty() ? 0 : mid[s * n + b]));
            in = w[s];
        }
        *stages[s] = register_module("layer" + std::to_string(s + 1), stage);
    }
    linear = register_module("linear", std::make_shared<nn::Linear>(w[2], classes, true, gen));
    kaiming_init(*this, gen);
}

Tensor CifarResNet::forward(const Tensor& x) {
    // every activation is an nn::ChannelTensor: all channels without a ChannelSubsetScope, the kept ones under one
    nn::ChannelTensor h = bn1->forward_relu((*conv1)(nn::ChannelTensor::all(x)));   // (N, |A|, H, W), A <= w0
    h = (*layer3)((*layer2)((*layer1)(h)));                 // (N, |A|, H/4, W/4): the stream over A <= w2
    h.x = flatten(adaptive_avg_pool2d(h.x, {1, 1}), 1);     // (N, |A|): global average pool, per channel
    return nn::to_dense((*linear)(h), linear->out_features);   // (N, classes)
}

}  // namespace razor::models

// ---- channel plans: scored layers and extract (channel_plan.h) ----

namespace razor::models {
namespace {

std::vector<int64_t> set_union(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> u;
    std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(u));
    return u;
}

// dst.weight = src.weight[rows][:, cols], with the rows not in `live` (a subset of rows) zeroed.
void copy_conv(nn::Conv2d& dst, const nn::Conv2d& src, const std::vector<int64_t>& rows,
               const std::vector<int64_t>& live, const std::vector<int64_t>& cols) {
    NoGradGuard no_grad;
    Tensor w = index_select(index_select(src.weight, 0, nn::index_tensor(rows)), 1, nn::index_tensor(cols)).contiguous();
    const int64_t row = w.numel() / std::max<int64_t>(1, w.size(0));
    size_t j = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
        while (j < live.size() && live[j] < rows[r]) ++j;
        if (j == live.size() || live[j] != rows[r]) std::fill_n(w.f32() + r * row, row, 0.f);
    }
    dst.weight.detach().copy_(w);
    dst.weight.bump_version();
}

// dst = src's channels `rows`; rows not in `live` get gamma = beta = 0 (output exactly 0), mean 0, var 1.
void copy_bn(nn::BatchNorm2d& dst, const nn::BatchNorm2d& src, const std::vector<int64_t>& rows,
             const std::vector<int64_t>& live) {
    NoGradGuard no_grad;
    const Tensor idx = nn::index_tensor(rows);
    Tensor g = index_select(src.weight, 0, idx), b = index_select(src.bias, 0, idx);
    Tensor m = index_select(src.running_mean, 0, idx), v = index_select(src.running_var, 0, idx);
    for (size_t r = 0; r < rows.size(); ++r)
        if (!std::binary_search(live.begin(), live.end(), rows[r]))
            g.f32()[r] = 0.f, b.f32()[r] = 0.f, m.f32()[r] = 0.f, v.f32()[r] = 1.f;
    for (auto [d, s] : {std::pair{dst.weight, g}, {dst.bias, b}, {dst.running_mean, m}, {dst.running_var, v}}) {
        d.detach().copy_(s);
        d.bump_version();
    }
    dst.num_batches_tracked.detach().copy_(src.num_batches_tracked);
}

}  // namespace

nn::Conv2d* BasicBlock::shortcut_conv() const {
    auto* seq = dynamic_cast<nn::Sequential*>(shortcut.get());
    return seq ? dynamic_cast<nn::Conv2d*>(seq->named_children()[0].second.get()) : nullptr;
}
nn::BatchNorm2d* BasicBlock::shortcut_bn() const {
    auto* seq = dynamic_cast<nn::Sequential*>(shortcut.get());
    return seq ? dynamic_cast<nn::BatchNorm2d*>(seq->named_children()[1].second.get()) : nullptr;
}

std::vector<BasicBlock*> CifarResNet::blocks() const {
    std::vector<BasicBlock*> out;
    for (const auto* stage : {layer1.get(), layer2.get(), layer3.get()})
        for (const auto& [name, child] : stage->named_children()) out.push_back(static_cast<BasicBlock*>(child.get()));
    return out;
}

std::string CifarResNet::block_path(size_t i) const {
    return fmt("layer", i / static_cast<size_t>(blocks_per_stage) + 1, ".", i % static_cast<size_t>(blocks_per_stage), ".");
}

std::vector<sparse::ScoredLayer> CifarResNet::scored_layers() const {
    // `stream`: the layers whose outputs the residual stream holds; `stream_name`: that stream, named after the
    // stage where it starts. A block with a non-identity shortcut (a projection conv, or option A's subsample and
    // zero pad, which moves the channels) starts a new stream.
    const auto bs = blocks();
    std::string stream_name = bs.front()->shortcut ? "stem" : "layer1";
    std::vector<sparse::ScoredLayer> layers = {{"conv1", conv1->out_channels, true, {}, stream_name}};
    std::vector<std::string> stream = {"conv1"};
    for (size_t i = 0; i < bs.size(); ++i) {
        const std::string prefix = block_path(i);
        if (bs[i]->shortcut) stream_name = fmt("layer", i / static_cast<size_t>(blocks_per_stage) + 1);
        layers.push_back({prefix + "conv1", bs[i]->conv1->out_channels, true, stream});
        layers.push_back({prefix + "conv2", bs[i]->conv2->out_channels, true, {prefix + "conv1"}, stream_name});
        if (auto* sc = bs[i]->shortcut_conv()) {
            layers.push_back({prefix + "shortcut.0", sc->out_channels, true, stream, stream_name});
            stream = {prefix + "shortcut.0"};
        }
        stream.push_back(prefix + "conv2");
    }
    layers.push_back({"linear", linear->out_features, false, stream});
    return layers;
}

ChannelPrunable::Extracted CifarResNet::extract(const ChannelPlan& plan) const {
    const auto bs = blocks();
    const int64_t n = blocks_per_stage;
    const bool narrow_stream = shortcut_kind == Shortcut::B;
    // The kept channels of block i's conv1, conv2 and projection-shortcut conv.
    auto o1 = [&](size_t i) -> const std::vector<int64_t>& { return plan.at(block_path(i) + "conv1"); };
    auto o2 = [&](size_t i) -> const std::vector<int64_t>& { return plan.at(block_path(i) + "conv2"); };
    auto osc = [&](size_t i) -> const std::vector<int64_t>& { return plan.at(block_path(i) + "shortcut.0"); };
    const std::vector<int64_t>& stem = plan.at("conv1");
    // U_s: the channels of stage s's stream that some layer writes (all of them for option A).
    std::array<std::vector<int64_t>, 3> U;
    for (int s = 0; s < 3; ++s) {
        const int64_t width = bs[s * n]->conv2->out_channels;
        if (!narrow_stream) {
            U[s] = nn::iota_channels(width);
            continue;
        }
        if (s == 0) U[s] = stem;
        for (int64_t b = 0; b < n; ++b) {
            const size_t i = s * n + b;
            U[s] = set_union(U[s], o2(i));
            if (bs[i]->shortcut_conv()) U[s] = set_union(U[s], osc(i));
        }
        if (s > 0 && !bs[s * n]->shortcut_conv()) U[s] = set_union(U[s], U[s - 1]);   // identity across stages
    }
    std::vector<int64_t> mids, widths = {static_cast<int64_t>(U[0].size())};
    for (size_t i = 0; i < bs.size(); ++i) {
        const int64_t s = static_cast<int64_t>(i) / n;
        mids.push_back(static_cast<int64_t>(o1(i).size()));
        widths.push_back(mids.back());
        widths.push_back(static_cast<int64_t>(U[s].size()));
        if (bs[i]->shortcut_conv()) widths.push_back(static_cast<int64_t>(U[s].size()));
    }
    Generator gen(0);
    auto out = std::make_shared<CifarResNet>(
        n, std::array<int64_t, 3>{int64_t(U[0].size()), int64_t(U[1].size()), int64_t(U[2].size())}, shortcut_kind,
        conv1->in_channels, linear->out_features, gen, mids);
    copy_conv(*out->conv1, *conv1, U[0], stem, nn::iota_channels(conv1->in_channels));
    copy_bn(*out->bn1, *bn1, U[0], stem);
    const auto obs = out->blocks();
    for (size_t i = 0; i < bs.size(); ++i) {
        const int64_t s = static_cast<int64_t>(i) / n;
        const auto& in = (i % n == 0 && s > 0) ? U[s - 1] : U[s];
        const auto& mid = o1(i);
        copy_conv(*obs[i]->conv1, *bs[i]->conv1, mid, mid, in);
        copy_bn(*obs[i]->bn1, *bs[i]->bn1, mid, mid);
        copy_conv(*obs[i]->conv2, *bs[i]->conv2, U[s], o2(i), mid);
        copy_bn(*obs[i]->bn2, *bs[i]->bn2, U[s], o2(i));
        if (auto* sc = bs[i]->shortcut_conv()) {
            copy_conv(*obs[i]->shortcut_conv(), *sc, U[s], osc(i), in);
            copy_bn(*obs[i]->shortcut_bn(), *bs[i]->shortcut_bn(), U[s], osc(i));
        }
    }
    {
        NoGradGuard no_grad;
        out->linear->weight.detach().copy_(index_select(linear->weight, 1, nn::index_tensor(U[2])));
        out->linear->bias.detach().copy_(linear->bias);
    }
    out->train(is_training());
    return {out, widths};
}

std::shared_ptr<CifarResNet> CifarResNet::from_widths(int64_t n, Shortcut kind, int64_t C, int64_t classes,
                                                      const std::vector<int64_t>& widths, Generator& gen) {
    // stem, then per block conv1, conv2 and (option B, first block of stages 2 and 3) the shortcut conv
    const size_t expected = 1 + 6 * n + (kind == Shortcut::B ? 2 : 0);
    auto bad = [&](const std::string& why) {
        return Error(fmt("CifarResNet: ", widths.size(), " widths do not describe a ", 6 * n + 2, "-layer CIFAR ResNet (",
                         why, "); hint: pass the widths razor sparse-train stored with the model"));
    };
    if (widths.size() != expected) throw bad(fmt("expected ", expected, " values"));
    for (int64_t w : widths)
        if (w < 1) throw bad("every width must be >= 1");
    std::array<int64_t, 3> stage{};
    std::vector<int64_t> mid;
    size_t l = 1;
    for (int64_t s = 0; s < 3; ++s)
        for (int64_t b = 0; b < n; ++b) {
            mid.push_back(widths[l]);
            const int64_t out = widths[l + 1];
            if (b == 0) stage[s] = out;
            if (out != stage[s] || (s == 0 && out != widths[0])) throw bad("conv2 widths differ within a stage");
            l += 2;
            if (kind == Shortcut::B && b == 0 && s > 0) {
                if (widths[l] != out) throw bad("a shortcut's width differs from its stage's");
                ++l;
            }
        }
    return std::make_shared<CifarResNet>(n, stage, kind, C, classes, gen, mid);
}

}  // namespace razor::models
