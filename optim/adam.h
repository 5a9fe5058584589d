// optim/adam.h -- Adam (L2 weight decay) and AdamW (decoupled weight decay), optionally AMSGrad.
//
// reference: torch.optim.Adam, torch.optim.AdamW (PyTorch 1.13, the single-tensor path). docs: docs/optim.md.
//
// The update, exactly as PyTorch (per parameter p with gradient g; t is p's own step count, starting at 1):
//   t += 1
//   Adam:   g = g + weight_decay * p                        (L2: the decay goes through the moments)
//   AdamW:  p = p * (1 - lr * weight_decay)                 (decoupled: before the Adam step, moments never see it)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   amsgrad:  v_max = max(v_max, v), and v_max replaces v below
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps               (eps outside the square root)
//   p = p - lr / (1 - beta1^t) * m / denom
// Bias corrections use the per-parameter t (a parameter that had no gradient at some step did not advance),
// computed in double as PyTorch does in Python; element math is f32 with the options rounded to f32.
// State: "<param>.step" (one i64), "<param>.exp_avg", "<param>.exp_avg_sq", "<param>.max_exp_avg_sq" (amsgrad).
#pragma once

#include <array>

#include "optim/optimizer.h"

namespace razor::optim {

struct AdamOptions {
    double lr = 1e-3;
    std::array<double, 2> betas = {0.9, 0.999};
    double eps = 1e-8;
    double weight_decay = 0;
    bool amsgrad = false;

    template <class F>
    void for_each_field(F&& f) {
        f("lr", lr), f("beta1", betas[0]), f("beta2", betas[1]), f("eps", eps), f("weight_decay", weight_decay),
            f("amsgrad", amsgrad);
    }
};

// AdamW's options: Adam's fields with PyTorch's AdamW default weight_decay 1e-2.
struct AdamWOptions {
    double lr = 1e-3;
    std::array<double, 2> betas = {0.9, 0.999};
    double eps = 1e-8;
    double weight_decay = 1e-2;
    bool amsgrad = false;

    template <class F>
    void for_each_field(F&& f) {
        f("lr", lr), f("beta1", betas[0]), f("beta2", betas[1]), f("eps", eps), f("weight_decay", weight_decay),
            f("amsgrad", amsgrad);
    }
};

// The shared step of Adam and AdamW (defined in adam.cpp for these two option types).
template <class Options>
class AdamBase : public GroupedOptimizer<Options> {
public:
    const char* momentum_option() const override { return "beta1"; }

protected:
    void update(size_t group, const std::string& name, const Tensor& p, const Tensor& grad) override;
    virtual bool decoupled_weight_decay() const = 0;
    void check_options(const Options& o) const override;
    std::vector<std::string> state_slots() const override { return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
    std::vector<const char*> reserved_slots(size_t group) const override {
        if (this->options(group).amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
        return {"exp_avg", "exp_avg_sq"};
    }
};
extern template class AdamBase<AdamOptions>;
extern template class AdamBase<AdamWOptions>;

class Adam : public AdamBase<AdamOptions> {
public:
    Adam(NamedParameters params, AdamOptions options = {}) { add_groups({{std::move(params), options}}); }
    explicit Adam(std::vector<ParamGroup<AdamOptions>> groups) { add_groups(std::move(groups)); }
    const char* type_name() const override { return "Adam"; }

protected:
    bool decoupled_weight_decay() const override { return false; }
};

class AdamW : public AdamBase<AdamWOptions> {
public:
    AdamW(NamedParameters params, AdamWOptions options = {}) { add_groups({{std::move(params), options}}); }
    explicit AdamW(std::vector<ParamGroup<AdamWOptions>> groups) { add_groups(std::move(groups)); }
    const char* type_name() const override { return "AdamW"; }

protected:
    bool decoupled_weight_decay() const override { return true; }
};

}  // namespace razor::optim
