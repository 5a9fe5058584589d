// apps/finetune.cpp -- `razor finetune`: razor train's loop on a pretrained backbone (see finetune.h).
//
// reference: torchvision's transfer-learning tutorial (load the backbone, new nn.Linear head), BackRazor_Neurips22
// (one global ratio r for the saved activations; BN frozen in eval mode). docs: docs/back-razor.md "razor finetune".
#include "apps/finetune.h"

#include <map>
#include <set>

#include "core/check.h"
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

PretrainedLoad load_pretrained(const std::string& command, const std::string& source, nn::Module& model,
                               const train::Checkpoint& checkpoint) {
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

}  // namespace razor::apps
