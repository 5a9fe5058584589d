// core/rng.cpp -- xoshiro256** seeded by SplitMix64 (see rng.h).
#include "core/rng.h"

#include <cmath>

namespace razor {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void Generator::seed_(uint64_t seed) {
    uint64_t x = seed;
    for (auto& word : s_) {
        word = splitmix64(x);
        x += 0x9E3779B97F4A7C15ull;
    }
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Generator::next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

float Generator::uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

float Generator::normal(float mean, float stddev) {
    // Box-Muller: u1 in (0, 1] so log(u1) is finite.
    double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    return mean + stddev * static_cast<float>(z);
}

uint64_t Generator::randint(uint64_t n) {
    if (n <= 1) return 0;
    // Reject the top partial bucket so every value is equally likely.
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = next_u64();
    } while (x >= limit);
    return x % n;
}

Generator& default_generator() {
    static Generator generator(0);
    return generator;
}

void manual_seed(uint64_t seed) { default_generator().seed_(seed); }

}  // namespace razor
