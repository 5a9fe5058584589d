// nn/module.cpp -- see module.h.
#include "nn/module.h"

namespace razor::nn {

Tensor Module::forward(const Tensor&) {
    throw Error(fmt(type_name(), "(", name_, "): forward(x) is not defined for this module; hint: call its own "
                    "forward signature"));
}

namespace {
thread_local ForwardObserver t_forward_observer;
}  // namespace

ForwardObserverGuard::ForwardObserverGuard(ForwardObserver observer) : previous_(std::move(t_forward_observer)) {
    t_forward_observer = std::move(observer);
}
ForwardObserverGuard::~ForwardObserverGuard() { t_forward_observer = std::move(previous_); }

void Module::notify_forward_observer(const Tensor& x, const Tensor& y) {
    if (t_forward_observer) t_forward_observer(*this, current_module_path(), x, y);
}

Tensor Module::operator()(const Tensor& x) { return call(x, [&] { return forward(x); }); }
// An observer sees the input after forward returns, so under one the call keeps x (no module writes over it).
Tensor Module::operator()(Tensor&& x) {
    if (t_forward_observer) return (*this)(static_cast<const Tensor&>(x));
    return call(x, [&] { return forward_consuming(std::move(x)); });
}

ChannelTensor Module::forward_subset(const ChannelTensor&) {
    throw Error(fmt(type_name(), "(", name_, "): cannot run on a channel subset; hint: call it on the dense tensor "
                    "(nn::to_dense), or give it a forward_subset"));
}

ChannelTensor Module::operator()(const ChannelTensor& x) { return call(x, [&] { return forward_subset(x); }); }

Tensor& Module::register_parameter(const std::string& name, Tensor value) {
    value.set_name(name);
    if (!value.requires_grad()) value.requires_grad_();
    parameters_.emplace_back(name, value);
    return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
    value.set_name(name);
    buffers_.emplace_back(name, value);
    return buffers_.back().second;
}

void Module::collect(const std::string& prefix, bool parameters,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
    for (const auto& [name, t] : parameters ? parameters_ : buffers_)
        if (t.defined()) out.emplace_back(prefix + name, t);
    for (const auto& [name, child] : children_) child->collect(prefix + name + ".", parameters, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
    std::vector<std::pair<std::string, Tensor>> out;
    collect("", true, out);
    return out;
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    for (auto& [name, t] : named_parameters()) out.push_back(t);
    return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
    std::vector<std::pair<std::string, Tensor>> out;
    collect("", false, out);
    return out;
}

int64_t Module::num_parameters() const {
    int64_t n = 0;
    for (const auto& [name, t] : named_parameters()) n += t.numel();
    return n;
}

void Module::train(bool on) {
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
    for (auto& [name, t] : named_parameters()) t.zero_grad();
}

std::map<std::string, Tensor> Module::state_dict() const {
    std::map<std::string, Tensor> out;
    for (auto& [name, t] : named_parameters()) out.emplace(name, t.detach());
    for (auto& [name, t] : named_buffers()) out.emplace(name, t.detach());
    return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
    std::map<std::string, Tensor> mine = state_dict();
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& [name, t] : mine) {
        auto it = state.find(name);
        if (it == state.end()) {
            missing.push_back(name);
        } else if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
            mismatched.push_back(fmt(name, ": expected ", shape_str(t.shape()), " ", dtype_name(t.dtype()), ", got ",
                                     shape_str(it->second.shape()), " ", dtype_name(it->second.dtype())));
        }
    }
    for (const auto& [name, t] : state)
        if (!mine.count(name)) unexpected.push_back(name);
    if (!mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()))) {
        std::string msg = fmt(type_name(), ".load_state_dict: the checkpoint does not fit this model");
        auto list = [&](const char* what, const std::vector<std::string>& keys) {
            if (keys.empty()) return;
            msg += fmt("\n  ", what, " (", keys.size(), "):");
            for (size_t i = 0; i < keys.size() && i < 20; ++i) msg += "\n    " + keys[i];
            if (keys.size() > 20) msg += fmt("\n    ... and ", keys.size() - 20, " more");
        };
        list("missing keys", missing);
        list("unexpected keys", unexpected);
        list("wrong shapes", mismatched);
        msg += "\n  hint: check --model and the number of classes; strict=false ignores missing/unexpected keys";
        throw Error(msg);
    }
    NoGradGuard no_grad;
    for (auto& [name, t] : mine) {
        auto it = state.find(name);
        if (it != state.end()) t.copy_(it->second);
    }
}

}  // namespace razor::nn
