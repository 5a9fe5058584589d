// tests/models/hashed.h -- weights and inputs that C++ and the PyTorch fixture script compute identically.
//
// ResNet-20's weights are 1 MB, too large for a committed fixture, so neither side stores them: every value is a
// function of its state-dict key and element index only (razor's counter_uniform seeded with the FNV-1a hash of
// the key). scripts/fixtures/ops_models.py (hashed_value) is the same code in numpy; both give bit-identical
// float32 values (each rule below rounds once).
#pragma once

#include <cmath>
#include <string>

#include "core/core.h"
#include "nn/module.h"

namespace razor::test {

inline uint64_t fnv1a64(const std::string& text) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : text) h = (h ^ c) * 0x100000001B3ull;
    return h;
}

// The value rule by key (see ops_models.py hashed_value): s = 2u - 1 in [-1, 1).
inline Tensor hashed_value(const std::string& key, const Shape& shape) {
    Tensor t = Tensor::empty(shape);
    const int64_t n = t.numel();
    const uint64_t seed = fnv1a64(key);
    const std::string last = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
    float* p = t.f32();
    for (int64_t i = 0; i < n; ++i) {
        const float u = counter_uniform(seed, static_cast<uint64_t>(i));
        const float s = 2.f * u - 1.f;
        float v;
        if (last == "running_mean") v = s * 0.1f;
        else if (last == "running_var") v = 0.75f + 0.5f * u;
        else if (last == "cls_token" || last == "pos_embed") v = s * 0.5f;
        else if (shape.size() >= 2 || key == "input") {
            const int64_t fan_in = key == "input" ? 1 : n / shape[0];
            v = s * static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in)));
        } else if (last.size() >= 6 && last.compare(last.size() - 6, 6, "weight") == 0) v = 1.f + 0.25f * s;
        else v = s * 0.1f;
        p[i] = v;
    }
    return t;
}

// r_i = -1 or +1 (the gradient probe of the fixtures' [sum g, sum g r, sum |g|]).
inline double probe_sign(const std::string& key, int64_t i) {
    return counter_uniform(fnv1a64("probe." + key), static_cast<uint64_t>(i)) < 0.5f ? -1.0 : 1.0;
}

// Overwrites every parameter and buffer (except num_batches_tracked) with its hashed value; returns the sum of
// all of them in double (the fixture's weights_checksum).
inline double fill_hashed(nn::Module& model) {
    NoGradGuard no_grad;
    double total = 0;
    for (auto& [name, t] : model.state_dict()) {
        if (t.dtype() != DType::F32) continue;
        t.copy_(hashed_value(name, t.shape()));
        for (float v : t.to_vector()) total += v;
    }
    return total;
}

}  // namespace razor::test
