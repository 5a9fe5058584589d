// models/lenet.cpp -- see lenet.h.
#include "models/lenet.h"

namespace razor::models {

LeNet5::LeNet5(int64_t C, int64_t S, int64_t classes, Generator& gen) {
    const int64_t pad = S == 28 ? 2 : 0;
    const int64_t s = ((S + 2 * pad - 4) / 2 - 4) / 2;   // spatial size after conv1-pool-conv2-pool
    if (S + 2 * pad < 14 || s < 1)
        throw Error(fmt("LeNet5: images of ", S, "x", S, " are too small (conv-pool-conv-pool needs >= 14 pixels); "
                        "hint: LeNet5 is for 28x28 or 32x32 inputs"));
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(C, 6, nn::Conv2dConfig{.kernel_size = 5, .padding = pad}, gen));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(6, 16, nn::Conv2dConfig{.kernel_size = 5}, gen));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(16 * s * s, 120, true, gen));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(120, 84, true, gen));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(84, classes, true, gen));
}

Tensor LeNet5::forward(const Tensor& x) {
    const Pool2dOptions pool{{2, 2}, {2, 2}, {0, 0}};
    Tensor h = max_pool2d(relu((*conv1)(x)), pool);   // (N, 6, 14, 14) on 32x32 / 28x28 inputs
    h = max_pool2d(relu((*conv2)(h)), pool);           // (N, 16, 5, 5)
    h = relu((*fc1)(flatten(h, 1)));                   // (N, 120)
    h = relu((*fc2)(h));                               // (N, 84)
    return (*fc3)(h);                                  // (N, classes)
}

}  // namespace razor::models
