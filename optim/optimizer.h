// optim/optimizer.h -- the Optimizer base: named parameters, zero_grad(), step(), state keyed by name.
//
// reference: torch.optim.Optimizer. State (momentum buffers, Adam moments) is keyed by the parameter's name
// (its state_dict key), never by pointer, so it can be saved and restored with the checkpoint.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/core.h"

namespace razor::optim {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
public:
    explicit Optimizer(NamedParameters params) : params_(std::move(params)) {}
    virtual ~Optimizer() = default;

    virtual void step() = 0;
    void zero_grad();                      // drops gradients (set_to_none=True, as PyTorch 2 defaults to)

    float lr() const { return lr_; }
    void set_lr(float lr) { lr_ = lr; }    // schedulers call this
    const NamedParameters& params() const { return params_; }

    // Per-parameter state tensors, "<param name>.<slot>" -> tensor, for checkpoints.
    virtual std::map<std::string, Tensor> state_dict() const { return state_; }
    virtual void load_state_dict(const std::map<std::string, Tensor>& state);

protected:
    // The state slot `slot` of parameter `name`, created zero-filled with `like`'s shape on first use.
    Tensor& state(const std::string& name, const char* slot, const Tensor& like, bool* created = nullptr);

    NamedParameters params_;
    std::map<std::string, Tensor> state_;
    float lr_ = 0.f;
};

}  // namespace razor::optim
