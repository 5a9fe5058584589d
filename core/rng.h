// core/rng.h -- razor's one deterministic random number generator.
//
// Algorithm: xoshiro256** (Blackman & Vigna, 2018) for the stream, seeded through SplitMix64 so that any 64-bit
// seed (0 included) gives a well-mixed state. Floats take the top 24 bits (uniform on [0, 1) with 2^-24 spacing);
// normals use the Box-Muller transform on two uniforms, one normal per call (no cached second value, so the
// state alone determines the stream and saves/restores exactly).
//
// Every init, dropout mask and shuffle in razor draws from a Generator; nothing reads the clock. The default
// generator (default_generator()) is seeded with 0 until manual_seed() is called.
//
// For per-element randomness that must not depend on the thread schedule (dropout on many threads, stochastic
// rounding), use counter_uniform(seed, index): a stateless SplitMix64 hash of (seed, index).
#pragma once

#include <array>
#include <cstdint>

namespace razor {

class Generator {
public:
    explicit Generator(uint64_t seed = 0) { seed_(seed); }

    void seed_(uint64_t seed);      // restart the stream from a seed
    uint64_t next_u64();            // the raw xoshiro256** output
    float uniform();                // [0, 1)
    float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
    float normal(float mean = 0.f, float stddev = 1.f);
    uint64_t randint(uint64_t n);   // uniform in [0, n), unbiased (rejection)

    // The full state, for checkpoints: restoring it continues the stream bit for bit.
    std::array<uint64_t, 4> state() const { return s_; }
    void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

private:
    std::array<uint64_t, 4> s_{};
};

Generator& default_generator();
void manual_seed(uint64_t seed);    // reseeds the default generator

uint64_t splitmix64(uint64_t x);
// Stateless uniform in [0, 1) for element `index` of a stream named by `seed`.
inline float counter_uniform(uint64_t seed, uint64_t index) {
    return static_cast<float>(splitmix64(seed ^ (index * 0x9E3779B97F4A7C15ull)) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace razor
