// nn/module.h -- Module: named parameters, buffers and children; train/eval; state_dict.
//
// reference: torch.nn.Module. docs: docs/nn.md.
//
// A model is a tree of runtime Module objects (no templates): depth and width are run-time choices. Names follow
// PyTorch so checkpoints interoperate: a parameter "weight" of child "conv1" of child "0" of child "layer1" is
// "layer1.0.conv1.weight".
//
// Calling a module (module(x)) runs forward(x) inside its NameScope, so every node it records on the tape is
// attributed to its path ("layer1.0.conv1"), and inside its SavePolicyGuard when a policy was set on it with
// set_save_policy (Back Razor's per-module overrides). Calling it on a ChannelTensor (module(h), nn/channel_subset.h)
// runs forward_subset(h) the same way: compact execution keeps names, attribution, policies and observers.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/core.h"
#include "nn/channel_subset.h"

namespace razor::nn {

class Module;

// Sees every module call made through Module::operator(), after forward returns, with the module's path
// ("layer1.0.conv1"; "" for the root), its input and its output. Thread-local; installed for a scope with
// ForwardObserverGuard. razor info builds its per-layer table (output shapes, FLOPs) from it.
using ForwardObserver =
    std::function<void(const Module& module, const std::string& path, const Tensor& input, const Tensor& output)>;
class ForwardObserverGuard {
public:
    explicit ForwardObserverGuard(ForwardObserver observer);
    ~ForwardObserverGuard();
    ForwardObserverGuard(const ForwardObserverGuard&) = delete;
    ForwardObserverGuard& operator=(const ForwardObserverGuard&) = delete;

private:
    ForwardObserver previous_;
};

class Module {
public:
    virtual ~Module() = default;
    Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    // The computation. Modules with one input override this; others add their own call signature.
    virtual Tensor forward(const Tensor& x);
    Tensor operator()(const Tensor& x);   // call(x, forward(x))
    // The same call for an x the caller gives up (a temporary, as in bn(conv(x)), or std::move(h)): the module may
    // write its result into x's storage when nothing else holds it (Tensor::sole_owner). Same values and gradients.
    // Those that override forward_consuming: BatchNorm2d (eval mode with frozen weights; training when the tape
    // keeps a code of x), ReLU6, GELU, MultiheadAttention and the transformer blocks; the rest run forward(x). Sequential gives each child's output up to the next. Under a
    // ForwardObserverGuard the call is operator()(const Tensor&): the observer reads x after forward.
    Tensor operator()(Tensor&& x);        // call(x, forward_consuming(std::move(x)))
    virtual Tensor forward_consuming(Tensor&& x) { return forward(x); }

    // Runs f() as operator() runs forward: inside this module's name scope and save policy, then reports (x, f())
    // to the forward observer. For a second call signature of a module (BatchNorm2d::forward_relu), and, with an f
    // that returns a result already computed, for a module whose work a neighbour did fused (VGG's ReLU after a
    // BatchNorm2d), so observers (razor info) still see it run.
    template <class F>
    Tensor call(const Tensor& x, F&& f) {
        return scoped([&] {
            Tensor y = f();
            notify_forward_observer(x, y);
            return y;
        });
    }

    // ---- channel subsets (nn/channel_subset.h) ----
    // The module on activations that hold only some of their channels. forward_subset's default throws: a module
    // that can run on a subset overrides it (Conv2d, BatchNorm2d, Linear, ReLU, MaxPool2d, Sequential, the models'
    // blocks). operator() runs it as it runs forward; call(ChannelTensor, f) is call() for a ChannelTensor result.
    virtual ChannelTensor forward_subset(const ChannelTensor& x);
    ChannelTensor operator()(const ChannelTensor& x);   // call(x, forward_subset(x))
    template <class F>
    ChannelTensor call(const ChannelTensor& x, F&& f) {
        ChannelTensor y;
        call(x.x, [&] { return (y = f()).x; });   // the observer sees the compact tensors
        return y;
    }

    virtual std::string type_name() const { return "Module"; }

    // ---- parameters, buffers, children (recursive, in registration order, PyTorch names) ----
    std::vector<std::pair<std::string, Tensor>> named_parameters() const;
    std::vector<Tensor> parameters() const;
    std::vector<std::pair<std::string, Tensor>> named_buffers() const;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
    int64_t num_parameters() const;

    // ---- modes ----
    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }

    void zero_grad();   // drops every parameter's gradient (PyTorch's set_to_none=True)

    // ---- checkpoints ----
    std::map<std::string, Tensor> state_dict() const;   // parameters and buffers, detached aliases
    // strict: every key of the model must be present and every key given must be known; all problems are listed in one
    // error (missing / unexpected / wrong shape). Copies values in place (parameter identities stay, optimizers keep
    // working).
    void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

    // ---- Back Razor hook: the policy for everything this module (and its children) saves ----
    void set_save_policy(std::shared_ptr<const SavePolicy> policy) { save_policy_ = std::move(policy); }

    const std::string& name() const { return name_; }

protected:
    Tensor& register_parameter(const std::string& name, Tensor value);
    Tensor& register_buffer(const std::string& name, Tensor value);
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
        child->name_ = name;
        children_.emplace_back(name, child);
        return child;
    }

    // Runs f inside this module's name scope and save policy (operator() uses it; custom call signatures should too).
    template <class F>
    auto scoped(F&& f) {
        NameScope scope(name_);
        SavePolicyGuard policy(save_policy_);
        return f();
    }

private:
    void notify_forward_observer(const Tensor& x, const Tensor& y);
    void collect(const std::string& prefix, bool parameters, std::vector<std::pair<std::string, Tensor>>& out) const;

    std::string name_;
    bool training_ = true;
    std::vector<std::pair<std::string, Tensor>> parameters_;
    std::vector<std::pair<std::string, Tensor>> buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    std::shared_ptr<const SavePolicy> save_policy_;
};

}  // namespace razor::nn
