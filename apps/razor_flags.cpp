// apps/razor_flags.cpp -- see razor_flags.h.
#include "apps/razor_flags.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "apps/suggest.h"
#include "core/check.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "sparse/razor_policy.h"

namespace razor::apps {
namespace {

const char* const kRazorHelp =
    "Back Razor: fraction of each saved activation dropped from the tape, in [0, 1) (0 = dense tape; 0.9 keeps the "
    "top 10% per sample)";
const char* const kRazorValuesHelp =
    "Back Razor: precision of the kept values and of LayerNorm inputs, fp16 (trains as fp32 does) | fp32 | int8 "
    "(the smallest)";
const char* const kRazorGeluHelp =
    "Back Razor: GELU input kept as d4 (4-bit derivative code) | fp16 (dense, the reference) | fp32 | int8 | razored";

const char* const kRazorBnHelp =
    "Back Razor: train-mode BatchNorm inputs kept dense (fp32, exact BN backward) | f16 (dense fp16, half) | int8 "
    "(dense int8, one scale per channel, a quarter) | razored (smallest; unstable at r >= 0.9)";

const char* const kRazorAttnHelp =
    "Back Razor: matmul operands and softmax outputs (attention Q, K, V, P) kept as int8 (dense int8; a ViT fine-tune "
    "trains like dense) | razored (the reference; smaller tape, lower accuracy) | fp32 (dense)";

const char* const kRazorInputHelp =
    "Back Razor: the first layer's input (the image batch) kept dense, by reference as the dense tape keeps it "
    "(closer to dense accuracy) | razored (the reference)";

const char* const kRazorHeadHelp =
    "Back Razor: the classifier head's input (one feature vector per image) kept dense, so a new head learns from "
    "every feature (closer to dense accuracy) | razored (the reference)";

const char* const kRazorAfterBnHelp =
    "Back Razor: a conv input that is relu(BatchNorm(x)) of a BN whose input is kept as int8 (--razor-bn int8), "
    "as in a ResNet block's second conv: derived (rebuilt dense from the BN's codes in backward: a smaller tape, "
    "closer to dense accuracy) | razored (pruned like every conv input, the reference)";

using WeightLayer = std::pair<std::string, nn::Module*>;   // path, module

// Every Conv2d and Linear in registration order, depth first: the first reads the input, the last Linear is the
// classifier head (as apps/finetune.h's classifier_head).
void collect_weight_layers(nn::Module& m, const std::string& path, std::vector<WeightLayer>& out) {
    if (dynamic_cast<nn::Conv2d*>(&m) || dynamic_cast<nn::Linear*>(&m)) out.emplace_back(path, &m);
    for (const auto& [name, child] : m.named_children())
        collect_weight_layers(*child, path.empty() ? name : path + "." + name, out);
}

void check_dense_or_razored(const std::string& command, const std::string& flag, const std::string& value,
                            const std::string& dense_keeps) {
    if (value != "dense" && value != "razored")
        throw Error(fmt(command, ": --", flag, " must be one of dense | razored; got '", value, "'; hint: dense keeps ",
                        dense_keeps, " as the dense tape does, razored prunes it as the reference"));
}

}  // namespace

const FlagTable<RazorFlags>& razor_flag_family() {
    static const FlagTable<RazorFlags> table = FlagTable<RazorFlags>()
                                                   .real("razor", "0", kRazorHelp, &RazorFlags::ratio)
                                                   .text("razor-values", "fp16", kRazorValuesHelp, &RazorFlags::values)
                                                   .text("razor-gelu", "d4", kRazorGeluHelp, &RazorFlags::gelu)
                                                   .text("razor-bn", "int8", kRazorBnHelp, &RazorFlags::bn)
                                                   .text("razor-attn", "int8", kRazorAttnHelp, &RazorFlags::attn)
                                                   .text("razor-input", "dense", kRazorInputHelp, &RazorFlags::input)
                                                   .text("razor-head", "dense", kRazorHeadHelp, &RazorFlags::head)
                                                   .text("razor-after-bn", "derived", kRazorAfterBnHelp,
                                                         &RazorFlags::after_bn);
    return table;
}

std::shared_ptr<const SavePolicy> razor_policy_from_flags(const std::string& command, const RazorFlags& flags) {
    const double ratio = flags.ratio;
    if (!(ratio >= 0 && ratio < 1))
        throw Error(fmt(command, ": --razor must be in [0, 1) (the fraction of each saved activation dropped; 0 = the "
                        "dense tape), got ", ratio, "; hint: --razor 0.9 keeps 10%"));
    const std::map<std::string, sparse::ValueCodec> codecs = {
        {"fp32", sparse::ValueCodec::F32}, {"fp16", sparse::ValueCodec::F16}, {"int8", sparse::ValueCodec::I8}};
    auto v = codecs.find(flags.values);
    if (v == codecs.end())
        throw Error(fmt(command, ": --razor-values must be one of fp32 | fp16 | int8; got '", flags.values,
                        "'; hint: fp16 (the default) trains as fp32 does, fp32 is lossless, int8 is the smallest"));
    const std::map<std::string, sparse::GeluSave> gelu_modes = {
        {"d4", sparse::GeluSave::Derivative4}, {"fp16", sparse::GeluSave::DenseF16}, {"fp32", sparse::GeluSave::Dense},
        {"int8", sparse::GeluSave::DenseI8},   {"razored", sparse::GeluSave::Razored}};
    auto g = gelu_modes.find(flags.gelu);
    if (g == gelu_modes.end())
        throw Error(fmt(command, ": --razor-gelu must be one of d4 | fp16 | fp32 | int8 | razored; got '", flags.gelu,
                        "'; hint: fp16 is the reference's choice, d4 the smallest"));
    const std::vector<std::pair<std::string, sparse::BatchNormSave>> bn_modes = {
        {"dense", sparse::BatchNormSave::Dense},
        {"f16", sparse::BatchNormSave::DenseF16},
        {"int8", sparse::BatchNormSave::ChannelI8},
        {"razored", sparse::BatchNormSave::Razored}};
    auto bn = std::find_if(bn_modes.begin(), bn_modes.end(), [&](const auto& m) { return m.first == flags.bn; });
    if (bn == bn_modes.end()) {
        std::vector<std::string> names;
        for (const auto& m : bn_modes) names.push_back(m.first);
        const std::string near = nearest_name(flags.bn, names);
        throw Error(fmt(command, ": --razor-bn must be one of dense | f16 | int8 | razored; got '", flags.bn, "'",
                        near.empty() ? "" : "; did you mean '" + near + "'?",
                        "; hint: dense keeps BatchNorm's backward exact, int8 is a quarter of its size"));
    }
    const std::map<std::string, sparse::AttentionSave> attention_modes = {
        {"razored", sparse::AttentionSave::Razored}, {"int8", sparse::AttentionSave::DenseI8},
        {"fp32", sparse::AttentionSave::Dense}};
    auto a = attention_modes.find(flags.attn);
    if (a == attention_modes.end())
        throw Error(fmt(command, ": --razor-attn must be one of razored | int8 | fp32; got '", flags.attn,
                        "'; hint: int8 keeps attention's input gradients close to dense at a quarter of fp32"));
    check_dense_or_razored(command, "razor-input", flags.input, "the image batch");
    check_dense_or_razored(command, "razor-head", flags.head, "the head's input");
    if (flags.after_bn != "derived" && flags.after_bn != "razored")
        throw Error(fmt(command, ": --razor-after-bn must be one of derived | razored; got '", flags.after_bn,
                        "'; hint: derived rebuilds relu(BatchNorm(x)) from the BN's int8 codes, razored prunes it"));
    if (ratio == 0) return nullptr;
    sparse::RazorConfig config;
    config.batch_norm = bn->second;
    config.ratio = ratio;
    config.values = v->second;
    config.norm_values = v->second;
    config.gelu = g->second;
    config.attention = a->second;
    config.derive_after_batch_norm = flags.after_bn == "derived";
    return std::make_shared<sparse::RazorSavePolicy>(config);
}

DenseLayers keep_layers_dense(nn::Module& model, const RazorFlags& flags) {
    DenseLayers kept;
    if (flags.ratio == 0) return kept;
    std::vector<WeightLayer> layers;
    collect_weight_layers(model, "", layers);
    const auto keep = [](const WeightLayer& layer) {
        layer.second->set_save_policy(std::make_shared<DenseSavePolicy>());
        return layer.first;
    };
    if (flags.input == "dense" && !layers.empty()) kept.input = keep(layers.front());
    const auto head = std::find_if(layers.rbegin(), layers.rend(),
                                   [](const WeightLayer& l) { return dynamic_cast<nn::Linear*>(l.second) != nullptr; });
    if (flags.head == "dense" && head != layers.rend()) kept.head = keep(*head);
    return kept;
}

}  // namespace razor::apps
