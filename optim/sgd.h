// optim/sgd.h -- SGD with momentum, dampening, Nesterov and (coupled) weight decay.   reference: torch.optim.SGD
//
// docs: docs/optim.md. The update, exactly as PyTorch 1.13 (per parameter p with gradient g, per group options):
//   d = g + weight_decay * p
//   if momentum != 0:  buf = d on the first step, else buf = momentum * buf + (1 - dampening) * d
//                      d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
// State: "<param>.momentum_buffer" (only when momentum != 0). Parameters without a gradient are skipped.
// Options are doubles, as PyTorch's Python floats; each kernel multiplies by them rounded to f32, with fused
// multiply-adds where PyTorch's AVX2 kernels fuse, so updates match torch bit for bit on FMA machines.
#pragma once

#include "optim/optimizer.h"

namespace razor::optim {

struct SGDOptions {
    double lr = 0.01;
    double momentum = 0;
    double dampening = 0;
    double weight_decay = 0;
    bool nesterov = false;

    template <class F>
    void for_each_field(F&& f) {
        f("lr", lr), f("momentum", momentum), f("dampening", dampening), f("weight_decay", weight_decay),
            f("nesterov", nesterov);
    }
};

class SGD : public GroupedOptimizer<SGDOptions> {
public:
    SGD(NamedParameters params, SGDOptions options);   // one group
    explicit SGD(std::vector<ParamGroup<SGDOptions>> groups);
    const char* type_name() const override { return "SGD"; }
    const char* momentum_option() const override { return "momentum"; }

protected:
    void update(size_t group, const std::string& name, const Tensor& p, const Tensor& grad) override;
    void check_options(const SGDOptions& o) const override;
    std::vector<std::string> state_slots() const override { return {"momentum_buffer"}; }
    std::vector<const char*> reserved_slots(size_t group) const override {
        if (options(group).momentum == 0) return {};
        return {"momentum_buffer"};
    }
};

}  // namespace razor::optim
