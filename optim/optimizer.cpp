// optim/optimizer.cpp -- see optimizer.h.
#include "optim/optimizer.h"

#include <bit>
#include <cstdlib>
#include <set>

namespace razor::optim {

Tensor pack_f64(double value) {
    Tensor t = Tensor::zeros({}, DType::I64);
    t.i64()[0] = std::bit_cast<int64_t>(value);
    return t;
}

double unpack_f64(const Tensor& t, const std::string& key) {
    if (!t.defined() || t.dtype() != DType::I64 || t.numel() != 1)
        throw Error(fmt("state '", key, "': expected one i64 holding a double's bits (pack_f64), got ",
                        t.defined() ? fmt(dtype_name(t.dtype()), " ", shape_str(t.shape())) : std::string("nothing"),
                        "; hint: the checkpoint was not written by razor's optimizers"));
    return std::bit_cast<double>(t.contiguous().i64()[0]);
}

void Optimizer::step() {
    NoGradGuard no_grad;
    check_grads();
    for (size_t g = 0; g < num_groups(); ++g)
        for (const auto& [name, p] : group_params(g))
            if (Tensor grad = grad_of(name, p); grad.defined()) update(g, name, p, grad);
}

void Optimizer::step_parameter(size_t group, size_t index) {
    const NamedParameters& params = group_params(group);
    if (index >= params.size())
        throw Error(fmt(type_name(), ".step_parameter: group ", group, " has ", params.size(),
                        " parameters, got index ", index));
    NoGradGuard no_grad;
    const auto& [name, p] = params[index];
    if (Tensor grad = grad_of(name, p); grad.defined()) update(group, name, p, grad);
}

void Optimizer::zero_grad() {
    for (size_t g = 0; g < num_groups(); ++g)
        for (auto& [name, p] : group_params(g)) p.zero_grad();
}

NamedParameters Optimizer::params() const {
    NamedParameters all;
    for (size_t g = 0; g < num_groups(); ++g)
        for (const auto& np : group_params(g)) all.push_back(np);
    return all;
}

void Optimizer::set_lr(double lr) {
    for (size_t g = 0; g < num_groups(); ++g) set_lr(g, lr);
}

std::vector<double> Optimizer::lrs() const {
    std::vector<double> out;
    for (size_t g = 0; g < num_groups(); ++g) out.push_back(lr(g));
    return out;
}

double Optimizer::momentum(size_t group) const {
    if (!*momentum_option())
        throw Error(fmt(type_name(), ": has no momentum to read or cycle; hint: use SGD or Adam/AdamW, or turn "
                                     "cycle_momentum off"));
    return option(group, momentum_option());
}

void Optimizer::set_momentum(size_t group, double value) {
    if (!*momentum_option())
        throw Error(fmt(type_name(), ": has no momentum to set; hint: use SGD or Adam/AdamW, or turn cycle_momentum off"));
    set_option(group, momentum_option(), value);
}

void Optimizer::register_params(const NamedParameters& params) {
    std::set<const TensorImpl*> seen;
    for (size_t g = 0; g < num_groups(); ++g)
        for (const auto& [name, p] : group_params(g)) seen.insert(p.impl().get());
    for (const auto& [name, p] : params) {
        if (name.empty())
            throw Error(fmt(type_name(), ": a parameter has an empty name; hint: optimizer state is keyed by name, "
                                         "pass model.named_parameters()"));
        if (!p.defined() || p.dtype() != DType::F32)
            throw Error(fmt(type_name(), ": parameter '", name, "' must be a defined f32 tensor, got ",
                            p.defined() ? dtype_name(p.dtype()) : "an undefined tensor"));
        if (!p.is_contiguous())
            throw Error(fmt(type_name(), ": parameter '", name, "' is a non-contiguous view; hint: optimize the "
                                         "tensor that owns the storage"));
        if (shapes_.count(name))
            throw Error(fmt(type_name(), ": parameter '", name, "' appears twice (in the same or another group); "
                                         "hint: each parameter belongs to exactly one group"));
        if (!seen.insert(p.impl().get()).second)
            throw Error(fmt(type_name(), ": parameter '", name, "' is a tensor already given under another name; "
                                         "hint: each parameter belongs to exactly one group"));
        shapes_.emplace(name, p.shape());
    }
}

Tensor& Optimizer::state(const std::string& name, const char* slot, const Shape& shape, DType dtype, bool* created) {
    const std::string key = name + "." + slot;
    auto it = state_.find(key);
    if (created) *created = it == state_.end();
    if (it == state_.end()) {
        Tensor fresh;
        if (auto r = reserved_.find(key); r != reserved_.end()) {
            if (r->second.shape() == shape && r->second.dtype() == dtype) fresh = std::move(r->second);
            reserved_.erase(r);
        }
        it = state_.emplace(key, fresh.defined() ? std::move(fresh) : Tensor::zeros(shape, dtype)).first;
    }
    return it->second;
}

void Optimizer::reserve_group_state(size_t group) {
    for (const char* slot : reserved_slots(group))
        for (const auto& [name, p] : group_params(group)) {
            const std::string key = name + "." + slot;
            if (p.requires_grad() && !state_.count(key)) reserved_.try_emplace(key, Tensor::zeros(p.shape()));
        }
}

Tensor Optimizer::grad_of(const std::string& name, const Tensor& p) const {
    Tensor g = p.grad();
    if (!g.defined()) return g;
    if (g.shape() != p.shape() || g.dtype() != DType::F32)
        throw Error(fmt(type_name(), ".step: the gradient of '", name, "' is ", dtype_name(g.dtype()), " ",
                        shape_str(g.shape()), " but the parameter is f32 ", shape_str(p.shape()),
                        "; hint: a gradient set by hand must match its parameter"));
    return g.contiguous();
}

void Optimizer::check_grads() const {
    for (size_t g = 0; g < num_groups(); ++g)
        for (const auto& [name, p] : group_params(g)) grad_of(name, p);
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
    std::map<std::string, Tensor> out = state_;
    for (size_t g = 0; g < num_groups(); ++g)
        for (const auto& field : option_names())
            out.emplace(fmt("param_groups.", g, ".", field), pack_f64(option(g, field)));
    return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
    const std::string where = fmt(type_name(), ".load_state_dict");
    const std::vector<std::string> slots = state_slots(), fields = option_names();
    std::vector<std::map<std::string, double>> options(num_groups());
    std::map<std::string, Tensor> next;
    for (const auto& [key, t] : state) {
        if (key.rfind("param_groups.", 0) == 0) {
            // "param_groups.<g>.<field>"
            const std::string rest = key.substr(13);
            const size_t dot = rest.find('.');
            char* end = nullptr;
            const unsigned long g = std::strtoul(rest.c_str(), &end, 10);
            if (dot == std::string::npos || end != rest.c_str() + dot || dot == 0)
                throw Error(fmt(where, ": key '", key, "' is not param_groups.<group>.<option>"));
            if (g >= num_groups())
                throw Error(fmt(where, ": '", key, "' names group ", g, " but this optimizer has ", num_groups(),
                                " groups; hint: build the optimizer with the same groups as the checkpoint's"));
            const std::string field = rest.substr(dot + 1);
            bool known = false;
            for (const auto& f : fields) known |= f == field;
            if (!known)
                throw Error(fmt(where, ": '", key, "' is not an option of ", type_name(),
                                "; hint: the checkpoint belongs to another optimizer"));
            options[g][field] = unpack_f64(t, key);
            continue;
        }
        const size_t dot = key.rfind('.');
        const std::string name = dot == std::string::npos ? key : key.substr(0, dot);
        const std::string slot = dot == std::string::npos ? "" : key.substr(dot + 1);
        auto shape = shapes_.find(name);
        if (shape == shapes_.end())
            throw Error(fmt(where, ": state '", key, "' names no parameter of this optimizer; hint: the checkpoint "
                                   "belongs to another model or optimizer"));
        bool known = false;
        for (const auto& s : slots) known |= s == slot;
        if (!known)
            throw Error(fmt(where, ": state '", key, "' has slot '", slot, "', which ", type_name(),
                            " does not keep; hint: the checkpoint belongs to another optimizer"));
        if (!t.defined()) throw Error(fmt(where, ": state '", key, "' is undefined"));
        if (slot == "step") {
            if (t.dtype() != DType::I64 || t.numel() != 1)
                throw Error(fmt(where, ": state '", key, "' must be one i64 (the step count), got ",
                                dtype_name(t.dtype()), " ", shape_str(t.shape())));
            // step() adds 1 (int64 overflow at 2^63 - 1) and raises betas to it (a negative count makes the bias
            // corrections negative and the update NaN): only counts a run can reach are accepted.
            const int64_t count = t.contiguous().i64()[0];
            if (count < 0 || count > (int64_t{1} << 53))
                throw Error(fmt(where, ": state '", key, "' (the step count) must be in [0, 2^53], got ", count,
                                "; hint: the checkpoint is corrupt"));
        } else if (t.dtype() != DType::F32 || t.shape() != shape->second) {
            throw Error(fmt(where, ": state '", key, "' is ", dtype_name(t.dtype()), " ", shape_str(t.shape()),
                            " but parameter '", name, "' is f32 ", shape_str(shape->second),
                            "; hint: the checkpoint belongs to another model"));
        }
        next.emplace(key, t.clone());
    }
    load_options(options);   // validates, then replaces (throws before changing anything)
    state_ = std::move(next);
    for (const auto& [key, t] : state_) reserved_.erase(key);
}

}  // namespace razor::optim
