// nn/layernorm.h -- LayerNorm(D) over the last dimension.   reference: torch.nn.LayerNorm (eps 1e-5, affine)
#pragma once

#include "nn/module.h"

namespace razor::nn {

class LayerNorm : public Module {
public:
    explicit LayerNorm(int64_t dim, float eps = 1e-5f);
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "LayerNorm"; }

    Tensor weight, bias;   // (D)
    int64_t dim;
    float eps;
};

}  // namespace razor::nn
