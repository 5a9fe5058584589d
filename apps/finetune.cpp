// apps/finetune.cpp -- `razor finetune`: razor train's loop on a pretrained backbone (see finetune.h).
//
// reference: torchvision's transfer-learning tutorial (load the backbone, new nn.Linear head), BackRazor_Neurips22
// (one global ratio r for the saved activations; BN frozen in eval mode). docs: docs/back-razor.md "razor finetune".
#include "apps/finetune.h"

#include <map>
#include <set>

#include "apps/freeze.h"
#include "core/check.h"
#include "models/pretrained.h"
#include "nn/batchnorm.h"
#include "nn/linear.h"

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

PretrainedModel pretrained_model(const std::string& command, const std::string& source, const std::string& model,
                                 const train::Checkpoint& checkpoint) {
    const models::CheckpointArchitecture arch = models::identify_checkpoint(checkpoint.model);
    auto recorded = checkpoint.model_metadata.find("model");
    PretrainedModel m;
    m.name = model.empty() && recorded != checkpoint.model_metadata.end() ? recorded->second : model;
    if (m.name.empty()) {
        if (arch.model.empty())
            throw Error(fmt(command, ": --from ", source, " does not record its model, and its keys name no "
                            "architecture razor knows (", arch.detail, "); hint: pass --model (razor info "
                            "--checkpoint ", source, " shows what the file holds)"));
        m.name = arch.model;
    }
    if (m.name == arch.model && arch.depth != 12) m.depth = arch.depth;   // a ViT cut to fewer blocks
    if (recorded == checkpoint.model_metadata.end()) m.preprocessing = models::published_preprocessing(arch.dialect);
    return m;
}

PretrainedLoad load_pretrained(const std::string& command, const std::string& source, nn::Module& model,
                               const train::Checkpoint& checkpoint) {
    PretrainedLoad r;
    r.head = classifier_head(model);
    const models::FittedState f = models::fit_state(checkpoint.model, model, r.head, fmt(command, ": --from ", source));
    if (!f.complete()) {
        auto it = checkpoint.model_metadata.find("model");
        const std::string recorded = it == checkpoint.model_metadata.end() ? "" : it->second;
        const models::CheckpointArchitecture arch = models::identify_checkpoint(checkpoint.model);
        const std::string source_model = !recorded.empty() ? recorded : !arch.model.empty() ? arch.model
                                                                                             : "(not recorded)";
        std::string what;
        if (!f.missing.empty()) what += fmt("; missing in the checkpoint: ", listed(f.missing));
        if (!f.unexpected.empty()) what += fmt("; not in the model: ", listed(f.unexpected));
        if (!f.mismatched.empty()) what += fmt("; shape (checkpoint vs model): ", listed(f.mismatched));
        throw Error(fmt(command, ": --from ", source, " does not fit the model apart from its head '", r.head, "'",
                        what, "; hint: the checkpoint's model is ", source_model,
                        ": pass the --model it was trained with (and data of the same image size)"));
    }
    std::map<std::string, Tensor> state = model.state_dict();   // the fresh model: the head stays as initialised
    for (const auto& [key, t] : f.state) state[key] = t;
    model.load_state_dict(state);
    r.loaded = static_cast<int64_t>(f.state.size());
    r.source_head_weight = f.file_head;
    r.head_loaded = f.head_fits;
    r.dialect = f.dialect;
    r.resized = f.resized;
    return r;
}

std::string pretrained_lines(const std::string& source, const PretrainedLoad& r, int64_t classes) {
    std::string s = fmt("from   ", source, ": ", r.loaded, " tensors loaded (", r.dialect, " names",
                        r.resized.empty() ? "" : "; " + r.resized, ")\n");
    if (r.head_loaded) return s + fmt("head   '", r.head, "' loaded from the checkpoint (", classes, " classes)\n");
    return s + fmt("head re-initialised for ", classes, " classes (checkpoint has ",
                   r.source_head_weight.empty() ? std::string("none") : fmt(r.source_head_weight[0]), ")\n");
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

TrainableParameters trainable_parameters(const TrainOptions& c, nn::Module& model) {
    TrainableParameters t;
    if (c.freeze_bn)
        t.lines += fmt("freeze ", freeze_batchnorm(model), " BatchNorm2d layers (eval mode, weight and bias not "
                       "trained)\n");
    if (!c.freeze.empty() || !c.train_only.empty())
        t.lines += freeze_line(apply_freeze(c.command, model, c.freeze, c.train_only)) + "\n";
    t.groups = plan_param_groups(model, c.finetune ? classifier_head(model) : "", c.head_lr_mult, c.wd_all);
    if (c.finetune) t.lines += "groups " + groups_text(t.groups, c.optimiser) + "\n";
    return t;
}

}  // namespace razor::apps
