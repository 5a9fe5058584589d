// models/mlp.cpp -- see mlp.h.
#include "models/mlp.h"

#include "nn/linear.h"

namespace razor::models {

std::shared_ptr<nn::Sequential> mlp(int64_t in_features, const std::vector<int64_t>& hidden, int64_t num_classes,
                                    Generator& gen) {
    auto model = std::make_shared<nn::Sequential>();
    model->add(std::make_shared<nn::Flatten>());
    int64_t width = in_features;
    for (int64_t h : hidden) {
        model->add(std::make_shared<nn::Linear>(width, h, true, gen));
        model->add(std::make_shared<nn::ReLU>());
        width = h;
    }
    model->add(std::make_shared<nn::Linear>(width, num_classes, true, gen));
    return model;
}

}  // namespace razor::models
