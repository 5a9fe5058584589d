// apps/finetune.cpp -- `razor finetune`: razor train's loop on a pretrained backbone (see finetune.h).
//
// reference: torchvision's transfer-learning tutorial (load the backbone, new nn.Linear head), BackRazor_Neurips22
// (one global ratio r for the saved activations; BN frozen in eval mode). docs: docs/back-razor.md "razor finetune".
#include "apps/finetune.h"

#include <map>
#include <set>

#include "apps/commands.h"
#include "core/check.h"
#include "nn/batchnorm.h"
#include "nn/linear.h"
#include "sparse/razor_policy.h"

namespace razor::apps {
namespace {

// Pre-order walk over the module tree with PyTorch paths ("" for the root). M: Module or const Module.
template <class M, class F>
void visit(M& m, const std::string& path, F&& f) {
    f(m, path);
    for (const auto& [name, child] : m.named_children())
        visit<M>(*child, path.empty() ? name : path + "." + name, f);
}

std::string listed(const std::vector<std::string>& items) {
    std::string s;
    for (size_t i = 0; i < items.size() && i < 8; ++i) s += (i ? ", " : "") + items[i];
    if (items.size() > 8) s += fmt(", ... (", items.size(), " in all)");
    return s;
}

}  // namespace

int run_finetune(const std::vector<std::string>& argv) { return run_training(argv, true); }

std::string classifier_head(const nn::Module& model) {
    std::string head;
    bool found = false;
    visit(model, "", [&](const nn::Module& m, const std::string& path) {
        if (dynamic_cast<const nn::Linear*>(&m)) head = path, found = true;
    });
    if (!found)
        throw Error(fmt("razor finetune: the model (", model.type_name(), ") has no Linear layer to use as the "
                        "classifier head; hint: fine-tune a zoo model (razor info --list)"));
    return head;
}

PretrainedLoad load_pretrained(const std::string& command, const std::string& source, nn::Module& model,
                               const Checkpoint& checkpoint) {
    PretrainedLoad r;
    r.head = classifier_head(model);
    const std::string prefix = r.head.empty() ? "" : r.head + ".";
    auto is_head = [&](const std::string& key) {
        return r.head.empty() ? key.find('.') == std::string::npos : key.rfind(prefix, 0) == 0 &&
                                                                         key.find('.', prefix.size()) == std::string::npos;
    };
    std::map<std::string, Tensor> state = model.state_dict();   // the fresh model: the head stays as initialised
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& [key, t] : checkpoint.model) {
        if (is_head(key)) {
            if (key == prefix + "weight") r.source_head_weight = t.shape();
            continue;
        }
        auto it = state.find(key);
        if (it == state.end()) {
            unexpected.push_back(key);
            continue;
        }
        if (t.shape() != it->second.shape() || t.dtype() != it->second.dtype()) {
            mismatched.push_back(fmt(key, " ", shape_str(t.shape()), " vs ", shape_str(it->second.shape())));
            continue;
        }
        it->second = t;
        ++r.loaded;
    }
    for (const auto& [key, t] : state)
        if (!is_head(key) && !checkpoint.model.count(key)) missing.push_back(key);
    if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
        auto it = checkpoint.model_metadata.find("model");
        const std::string source_model = it == checkpoint.model_metadata.end() ? "(not recorded)" : it->second;
        std::string what;
        if (!missing.empty()) what += fmt("; missing in the checkpoint: ", listed(missing));
        if (!unexpected.empty()) what += fmt("; not in the model: ", listed(unexpected));
        if (!mismatched.empty()) what += fmt("; shape (checkpoint vs model): ", listed(mismatched));
        throw Error(fmt(command, ": --from ", source, " does not fit the model apart from its head '", r.head, "'",
                        what, "; hint: the checkpoint's model is ", source_model,
                        ": pass the --model it was trained with (and data of the same image size)"));
    }
    model.load_state_dict(state);
    return r;
}

int64_t freeze_batchnorm(nn::Module& model) {
    int64_t count = 0;
    visit(model, "", [&](nn::Module& m, const std::string&) {
        auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m);
        if (!bn) return;
        bn->eval();
        if (bn->weight.defined()) bn->weight.requires_grad_(false);
        if (bn->bias.defined()) bn->bias.requires_grad_(false);
        ++count;
    });
    return count;
}

const char* const kRazorHelp =
    "Back Razor: fraction of each saved activation dropped from the tape, in [0, 1) (0 = dense tape; 0.9 keeps the "
    "top 10% per sample)";
const char* const kRazorValuesHelp = "Back Razor: precision of the kept values, fp32 | fp16 | int8";
const char* const kRazorGeluHelp =
    "Back Razor: GELU input kept as d4 (4-bit derivative code) | fp16 (dense, the reference) | fp32 | int8 | razored";

const char* const kRazorBnHelp =
    "Back Razor: train-mode BatchNorm inputs kept dense (exact BN backward) | razored (smaller; unstable at r >= 0.9). "
    "--freeze-bn saves nothing for BN";

const char* const kRazorAttnHelp =
    "Back Razor: matmul operands and softmax outputs (attention Q, K, V, P) kept as int8 (dense int8; a ViT fine-tune "
    "trains like dense) | razored (the reference; smaller tape, lower accuracy) | fp32 (dense)";

RazorFlags razor_flags(const Args& args) {
    return {args.real("razor"), args.str("razor-values"), args.str("razor-gelu"), args.str("razor-bn"),
            args.str("razor-attn")};
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
                        "'; hint: fp32 is lossless on the kept values, int8 is the smallest"));
    const std::map<std::string, sparse::GeluSave> gelu_modes = {
        {"d4", sparse::GeluSave::Derivative4}, {"fp16", sparse::GeluSave::DenseF16}, {"fp32", sparse::GeluSave::Dense},
        {"int8", sparse::GeluSave::DenseI8},   {"razored", sparse::GeluSave::Razored}};
    auto g = gelu_modes.find(flags.gelu);
    if (g == gelu_modes.end())
        throw Error(fmt(command, ": --razor-gelu must be one of d4 | fp16 | fp32 | int8 | razored; got '", flags.gelu,
                        "'; hint: fp16 is the reference's choice, d4 the smallest"));
    if (flags.bn != "dense" && flags.bn != "razored")
        throw Error(fmt(command, ": --razor-bn must be one of dense | razored; got '", flags.bn,
                        "'; hint: dense keeps BatchNorm's backward exact, --freeze-bn stores nothing for BN"));
    const std::map<std::string, sparse::AttentionSave> attention_modes = {
        {"razored", sparse::AttentionSave::Razored}, {"int8", sparse::AttentionSave::DenseI8},
        {"fp32", sparse::AttentionSave::Dense}};
    auto a = attention_modes.find(flags.attn);
    if (a == attention_modes.end())
        throw Error(fmt(command, ": --razor-attn must be one of razored | int8 | fp32; got '", flags.attn,
                        "'; hint: int8 keeps attention's input gradients close to dense at a quarter of fp32"));
    if (ratio == 0) return nullptr;
    sparse::RazorConfig config;
    config.prune_batch_norm_inputs = flags.bn == "razored";
    config.ratio = ratio;
    config.values = v->second;
    config.norm_values = v->second;
    config.gelu = g->second;
    config.attention = a->second;
    return std::make_shared<sparse::RazorSavePolicy>(config);
}

}  // namespace razor::apps
