// optim/optimizer.cpp -- see optimizer.h.
#include "optim/optimizer.h"

namespace razor::optim {

void Optimizer::zero_grad() {
    for (auto& [name, p] : params_) p.zero_grad();
}

Tensor& Optimizer::state(const std::string& name, const char* slot, const Tensor& like, bool* created) {
    const std::string key = name + "." + slot;
    auto it = state_.find(key);
    if (created) *created = it == state_.end();
    if (it == state_.end()) it = state_.emplace(key, Tensor::zeros(like.shape())).first;
    return it->second;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
    for (const auto& [key, t] : state) {
        bool known = false;
        for (const auto& [name, p] : params_)
            if (key.rfind(name + ".", 0) == 0) {
                known = true;
                if (t.shape() != p.shape() && t.numel() != 1)
                    throw Error(fmt("optimizer.load_state_dict: state '", key, "' has shape ", shape_str(t.shape()),
                                    " but parameter '", name, "' is ", shape_str(p.shape()),
                                    "; hint: the checkpoint belongs to another model"));
            }
        if (!known)
            throw Error(fmt("optimizer.load_state_dict: state '", key, "' names no parameter of this optimizer; hint: "
                            "the checkpoint belongs to another model or optimizer"));
    }
    state_.clear();
    for (const auto& [key, t] : state) state_.emplace(key, t.clone());
}

}  // namespace razor::optim
