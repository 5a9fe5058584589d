// optim/sgd.cpp -- see sgd.h.
#include "optim/sgd.h"

namespace razor::optim {

SGD::SGD(NamedParameters params, SGDOptions options) : Optimizer(std::move(params)), options_(options) {
    if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
        throw Error("SGD: nesterov needs momentum > 0 and dampening 0 (as PyTorch)");
    if (options.lr < 0 || options.momentum < 0 || options.weight_decay < 0)
        throw Error(fmt("SGD: lr, momentum and weight_decay must be >= 0, got lr ", options.lr, ", momentum ",
                        options.momentum, ", weight_decay ", options.weight_decay));
    lr_ = options.lr;
}

void SGD::step() {
    NoGradGuard no_grad;
    const SGDOptions& o = options_;
    for (auto& [name, p] : params_) {
        Tensor g = p.grad();
        if (!g.defined()) continue;
        float* pp = p.f32();
        const float* pg = g.f32();
        const int64_t n = p.numel();
        float* buf = nullptr;
        bool first = false;
        if (o.momentum != 0.f) buf = state(name, "momentum_buffer", p, &first).f32();
        const float lr = lr_, wd = o.weight_decay, mom = o.momentum, damp = o.dampening;
        const bool nesterov = o.nesterov;
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
        for (int64_t i = 0; i < n; ++i) {
            float d = pg[i] + wd * pp[i];
            if (buf) {
                buf[i] = first ? d : mom * buf[i] + (1.f - damp) * d;
                d = nesterov ? d + mom * buf[i] : buf[i];
            }
            pp[i] -= lr * d;
        }
        p.bump_version();
    }
}

}  // namespace razor::optim
