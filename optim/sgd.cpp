// optim/sgd.cpp -- see sgd.h.
#include "optim/sgd.h"

#include <cmath>

#include "optim/fma.h"

namespace razor::optim {

SGD::SGD(NamedParameters params, SGDOptions options) { add_groups({{std::move(params), options}}); }
SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) { add_groups(std::move(groups)); }

void SGD::check_options(const SGDOptions& o) const {
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        throw Error(fmt("SGD: nesterov needs momentum > 0 and dampening 0 (as PyTorch), got momentum ", o.momentum,
                        ", dampening ", o.dampening));
    if (!(o.lr >= 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0) || !std::isfinite(o.lr) ||
        !std::isfinite(o.weight_decay) || !(o.momentum <= 1) || !(o.dampening >= 0 && o.dampening <= 1))
        throw Error(fmt("SGD: lr and weight_decay must be finite and >= 0, momentum and dampening in [0, 1], got lr ",
                        o.lr, ", momentum ", o.momentum, ", dampening ", o.dampening, ", weight_decay ",
                        o.weight_decay));
}

void SGD::update(size_t group, const std::string& name, const Tensor& p, const Tensor& grad) {
    const SGDOptions& o = groups_[group].options;
    // PyTorch multiplies f32 tensors by the options rounded to f32; 1 - dampening is formed in double first.
    const float neg_lr = static_cast<float>(-o.lr), wd = static_cast<float>(o.weight_decay),
                mom = static_cast<float>(o.momentum), keep = static_cast<float>(1 - o.dampening);
    const bool nesterov = o.nesterov, decay = o.weight_decay != 0;
    float* pp = p.f32();
    const float* pg = grad.f32();
    const int64_t n = p.numel();
    float* buf = nullptr;
    bool first = false;
    if (o.momentum != 0) buf = state(name, "momentum_buffer", p.shape(), DType::F32, &first).f32();
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
        float d = decay ? madd(pp[i], wd, pg[i]) : pg[i];          // g.add(p, alpha=weight_decay)
        if (buf) {
            buf[i] = first ? d : madd(d, keep, buf[i] * mom);      // buf.mul_(m).add_(d, alpha=1-damp)
            d = nesterov ? madd(buf[i], mom, d) : buf[i];          // d.add(buf, alpha=momentum)
        }
        pp[i] = madd(d, neg_lr, pp[i]);                            // p.add_(d, alpha=-lr)
    }
    p.bump_version();
}

}  // namespace razor::optim
