// optim/optimizer.h -- the Optimizer base: parameter groups, zero_grad(), step(), state keyed by name.
//
// reference: torch.optim.Optimizer. docs: docs/optim.md.
//
// Parameter groups. An optimizer holds one or more groups, each a list of named parameters with its own options
// (lr, weight_decay, momentum / betas, ...), as PyTorch's param_groups. The single-list constructor makes one group.
// Schedulers scale each group's lr from that group's base lr.
//
// State. Per-parameter state (momentum buffers, Adam moments, Adam's step count) is keyed by the parameter's name
// (its state_dict key) and a slot, "<param>.<slot>" -- e.g. "layer1.0.conv1.weight.exp_avg" -- never by pointer,
// so it can be saved with the checkpoint. state_dict() also carries every group's options as
// "param_groups.<g>.<field>" (lr, momentum, betas, ...: what PyTorch's param_groups hold), each one double stored
// bit for bit (pack_f64), so a resumed run continues bit-exactly. load_state_dict() validates everything first
// (names, slots, shapes, dtypes) and changes nothing when it throws. Option values are validated where PyTorch
// validates them: when a group is added (constructors, add_param_group).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/core.h"

namespace razor::optim {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

// A group of parameters sharing one set of options (PyTorch's param_groups entry).
template <class Options>
struct ParamGroup {
    NamedParameters params;
    Options options;
};

// A double kept exactly in a checkpoint: razor tensors have no f64 dtype, so the value's IEEE-754 bits are
// stored in a one-element i64 tensor (shape ()). In Python: struct.unpack("<d", struct.pack("<q", int(t)))[0].
Tensor pack_f64(double value);
double unpack_f64(const Tensor& t, const std::string& key);   // throws naming `key` when t is not such a tensor

class Optimizer {
public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    // Updates every parameter that has a gradient (grad mode off). A gradient of the wrong shape or dtype throws
    // before any parameter is updated.
    void step();
    // The same update for one parameter, `index` of group_params(group), if it has a gradient: what step() does for
    // each, and what optim::StepInBackward runs as soon as backward has completed that parameter's gradient.
    void step_parameter(size_t group, size_t index);
    void zero_grad();                      // drops gradients (set_to_none=True, as PyTorch 2 defaults to)
    virtual const char* type_name() const = 0;

    // ---- groups ----
    virtual size_t num_groups() const = 0;
    virtual const NamedParameters& group_params(size_t group) const = 0;
    NamedParameters params() const;        // every group's parameters, in group order

    double lr(size_t group = 0) const { return option(group, "lr"); }
    void set_lr(size_t group, double lr) { set_option(group, "lr", lr); }
    void set_lr(double lr);                // every group (schedulers set each group instead)
    std::vector<double> lrs() const;       // one per group

    // The option OneCycleLR cycles: SGD's momentum, Adam's beta1. Empty when the optimizer has none.
    virtual const char* momentum_option() const { return ""; }
    double momentum(size_t group) const;
    void set_momentum(size_t group, double value);

    // A group option by its checkpoint name ("lr", "momentum", "beta1", "nesterov" as 0/1, ...). As writes into
    // PyTorch's param_groups, set_option does not validate (a OneCycleLR may extrapolate the lr below 0 on its
    // last step, as PyTorch's does); constructors and add_param_group do. Unknown names throw.
    virtual double option(size_t group, const std::string& field) const = 0;
    virtual void set_option(size_t group, const std::string& field, double value) = 0;
    virtual std::vector<std::string> option_names() const = 0;

    // ---- checkpoints ----
    // "<param>.<slot>" -> the state tensor (aliases: clone before stepping on if you keep them), plus
    // "param_groups.<g>.<field>" -> pack_f64(value) for every group option.
    std::map<std::string, Tensor> state_dict() const;
    // Replaces all state with `state` (copies); group options present in `state` replace the current ones, as in
    // PyTorch (not re-validated: a saved lr may be a schedule's last, extrapolated value). Throws razor::Error,
    // changing nothing, for unknown names, slots or options, wrong shapes or dtypes, or a group out of range.
    void load_state_dict(const std::map<std::string, Tensor>& state);

protected:
    Optimizer() = default;

    // One parameter's update from its gradient `grad` (contiguous, p's shape, f32), with group `group`'s options.
    virtual void update(size_t group, const std::string& name, const Tensor& p, const Tensor& grad) = 0;
    // The state slots this optimizer may keep per parameter (validates load_state_dict).
    virtual std::vector<std::string> state_slots() const = 0;
    // Replaces group options (all groups; fields not in the map keep their value).
    virtual void load_options(const std::vector<std::map<std::string, double>>& options) = 0;

    // Registers a group's names: non-empty, unique across groups, one tensor each, f32. Throws naming the optimizer.
    void register_params(const NamedParameters& params);
    // The state slot `slot` of parameter `name`, created zero-filled (shape, dtype) on first use (*created = true;
    // a reserved buffer is handed out then).
    Tensor& state(const std::string& name, const char* slot, const Shape& shape, DType dtype = DType::F32,
                  bool* created = nullptr);
    // The f32 slots of each trained parameter (requires_grad) whose buffers are allocated when a group is added,
    // zero-filled, for state() to hand out on first use; state_dict() shows a slot only from then on, as PyTorch's
    // lazily created state. Why ahead: created in the first step() (after the first backward), each buffer took
    // memory that backward had just freed, in the middle of the activations, and pinned it for the rest of the
    // run. mobilenet_v2 at 224 px, batch 32, --razor 0.9 int8 from a .pth peaked at 786 MiB RSS, 647 MiB with its
    // momentum buffers allocated with the weights (core/allocator.h: large blocks are carved from segments).
    virtual std::vector<const char*> reserved_slots(size_t group) const { (void)group; return {}; }
    void reserve_group_state(size_t group);
    // p's gradient as a contiguous tensor of p's shape; undefined when p has none. Throws on a shape mismatch.
    Tensor grad_of(const std::string& name, const Tensor& p) const;
    // grad_of for every parameter: step() calls it first, so a bad gradient throws before anything is updated.
    void check_grads() const;

    std::map<std::string, Tensor> state_;
    std::map<std::string, Tensor> reserved_;   // "<param>.<slot>" -> zero-filled buffers state() has not handed out
    std::map<std::string, Shape> shapes_;   // every registered parameter's shape, by name
};

// The options-typed layer every concrete optimizer derives from. Options must provide
//   template <class F> void for_each_field(F&& f)   calling f("name", field) for each double / bool field
// (the names state_dict uses) and the derived optimizer check_options(options) (throws on bad values).
template <class Options>
class GroupedOptimizer : public Optimizer {
public:
    using Group = ParamGroup<Options>;

    size_t num_groups() const override { return groups_.size(); }
    const NamedParameters& group_params(size_t group) const override { return at(group).params; }
    const std::vector<Group>& param_groups() const { return groups_; }
    const Options& options(size_t group = 0) const { return at(group).options; }
    // Mutable options, as PyTorch's param_groups dicts (not validated; see set_option).
    Options& options(size_t group = 0) { return const_cast<Group&>(at(group)).options; }

    // PyTorch's add_param_group: a further group (its names must be new).
    void add_param_group(Group group) {
        check_options(group.options);
        register_params(group.params);
        groups_.push_back(std::move(group));
        reserve_group_state(groups_.size() - 1);
    }

    double option(size_t group, const std::string& field) const override {
        double out = 0;
        bool found = false;
        Options o = at(group).options;
        o.for_each_field([&](const char* name, auto& v) {
            if (field == name) out = static_cast<double>(v), found = true;
        });
        if (!found) throw_unknown_option(field);
        return out;
    }
    void set_option(size_t group, const std::string& field, double value) override {
        Options o = at(group).options;
        bool found = false;
        o.for_each_field([&](const char* name, auto& v) {
            if (field == name) assign(v, value), found = true;
        });
        if (!found) throw_unknown_option(field);
        groups_[group].options = o;
    }
    std::vector<std::string> option_names() const override {
        std::vector<std::string> names;
        Options o{};
        o.for_each_field([&](const char* name, auto&) { names.emplace_back(name); });
        return names;
    }

protected:
    // Throws razor::Error naming the optimizer and the bad value.
    virtual void check_options(const Options& options) const = 0;

    // Derived constructors call this (after construction so check_options dispatches to them).
    void add_groups(std::vector<Group> groups) {
        if (groups.empty())
            throw Error(fmt(type_name(), ": got no parameter groups; hint: pass model.named_parameters()"));
        for (auto& g : groups) add_param_group(std::move(g));
    }

    void load_options(const std::vector<std::map<std::string, double>>& options) override {
        std::vector<Group> next = groups_;
        for (size_t g = 0; g < options.size() && g < next.size(); ++g)
            next[g].options.for_each_field([&](const char* name, auto& v) {
                auto it = options[g].find(name);
                if (it != options[g].end()) assign(v, it->second);
            });
        groups_ = std::move(next);
    }

    const Group& at(size_t group) const {
        if (group >= groups_.size())
            throw Error(fmt(type_name(), ": parameter group ", group, " does not exist (", groups_.size(),
                            " groups); hint: groups are numbered from 0 in the order given"));
        return groups_[group];
    }

    std::vector<Group> groups_;

private:
    static void assign(double& field, double v) { field = v; }
    static void assign(bool& field, double v) { field = v != 0; }
    [[noreturn]] void throw_unknown_option(const std::string& field) const {
        std::string known;
        for (const auto& n : option_names()) known += (known.empty() ? "" : ", ") + n;
        throw Error(fmt(type_name(), ": no option '", field, "'; hint: the options are ", known));
    }
};

}  // namespace razor::optim
