// models/lenet.h -- LeNet-5 (LeCun et al., 1998) with ReLU and max-pooling, for 1x28x28 and 3x32x32 images.
//
//     conv1 5x5 C->6 (padding 2 on 28x28 inputs, so both sizes reach 5x5 below) ReLU MaxPool2
//     conv2 5x5 6->16 ReLU MaxPool2 -> flatten 16*5*5 = 400
//     fc1 400->120 ReLU, fc2 120->84 ReLU, fc3 84->classes
//
// reference: class LeNet5 in scripts/fixtures/ops_models.py (the PyTorch-tutorial form: ReLU and max-pool, not
// the original tanh and subsampling). Keys conv1.*, conv2.*, fc1.*, fc2.*, fc3.*. Init: PyTorch defaults.
// Parameters: 62,006 on 3x32x32, 61,706 on 1x28x28 (10 classes). docs: docs/models.md.
#pragma once

#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace razor::models {

class LeNet5 : public nn::Module {
public:
    // image_size: H = W of the inputs; 28 gets conv1 padding 2 (the classic MNIST set-up), others none.
    LeNet5(int64_t in_channels, int64_t image_size, int64_t num_classes, Generator& gen = default_generator());
    Tensor forward(const Tensor& x) override;   // x: (N, C, H, W) -> (N, classes)
    std::string type_name() const override { return "LeNet5"; }

    std::shared_ptr<nn::Conv2d> conv1, conv2;
    std::shared_ptr<nn::Linear> fc1, fc2, fc3;
};

}  // namespace razor::models
