// sparse/masker_avx2.h -- the Back Razor masker's AVX2+FMA kernels (sparse/masker_avx2.cpp), dispatched at run time.
//
// masker_avx2.cpp carries its own target flags (CMakeLists.txt, "kernel families"), so every x86-64 build holds these
// kernels and sparse/masker.cpp calls them when the active family is AVX2 (or AVX-512 in a build whose baseline
// lacks it). Call only when isa_supported(Isa::Avx2). This header declares functions only: no inline code that
// would be compiled once with AVX2 flags and once without.
//
// Each kernel does the leading whole 8-lane chunks (bracket pass) or 64-element words (pack) and leaves the rest to
// the portable loops in masker.cpp; results are bit-identical to those loops (tests/sparse/test_masker.cpp).
#pragma once

#include <cstdint>

namespace razor::sparse::detail {

// Over x[0, n) with n a multiple of 8: adds to `above` the keys > hi, writes the keys in [lo, hi] to out in index
// order and returns how many. Keys are |x|'s bits (x's bits & 0x7FFFFFFF). out needs room for n.
int64_t bracket_pass_avx2(const float* x, int64_t n, uint32_t lo, uint32_t hi, uint32_t* out, int64_t& above);

// Select-and-pack of `words` whole 64-element words of x: bits[w] gets word w's keep bits (key > threshold, plus the
// lowest-index ties while ties_left > 0, which it decrements), values the kept values in index order. Returns how
// many values it wrote; nothing beyond them is written.
int64_t pack_words_avx2(const float* x, int64_t words, uint32_t threshold, int64_t& ties_left, uint64_t* bits,
                        float* values);
// The same with the kept values stored as IEEE half (F16C, round to nearest even).
int64_t pack_words_avx2(const float* x, int64_t words, uint32_t threshold, int64_t& ties_left, uint64_t* bits,
                        uint16_t* values);

}  // namespace razor::sparse::detail
