// optim/sgd.h -- SGD with momentum, dampening, Nesterov and (coupled) weight decay.   reference: torch.optim.SGD
//
// The update, exactly as PyTorch (per parameter p with gradient g):
//   d = g + weight_decay * p
//   if momentum != 0:  buf = d on the first step, else buf = momentum * buf + (1 - dampening) * d
//                      d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
#pragma once

#include "optim/optimizer.h"

namespace razor::optim {

struct SGDOptions {
    float lr = 0.01f;
    float momentum = 0.f;
    float dampening = 0.f;
    float weight_decay = 0.f;
    bool nesterov = false;
};

class SGD : public Optimizer {
public:
    SGD(NamedParameters params, SGDOptions options);
    void step() override;
    const SGDOptions& options() const { return options_; }

private:
    SGDOptions options_;
};

}  // namespace razor::optim
