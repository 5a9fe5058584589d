// tests/fuzz/fuzz_support.h -- what every libFuzzer target shares: the input as a string, and the rule that a
// parser may reject input only with a razor::Error that is not an internal check failure.
//
// Anything else -- a crash, a sanitizer report, std::bad_alloc, an exception of another type escaping, or a
// "razor internal check failed" Error (a RAZOR_CHECK the parser's own validation should have made unreachable) --
// is a bug, and abort() turns it into a libFuzzer crash with the input saved.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/check.h"

namespace razor::fuzz {

inline std::string bytes(const uint8_t* data, size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `parse`; returns true when it accepted the input, false when it rejected it with a proper Error.
template <class F>
bool accepts(F&& parse) {
    try {
        parse();
        return true;
    } catch (const Error& e) {
        const std::string_view what = e.what();
        if (what.starts_with("razor internal check failed")) {
            std::fprintf(stderr, "fuzz: internal check reached: %s\n", e.what());
            std::abort();
        }
        if (what.empty()) {
            std::fprintf(stderr, "fuzz: razor::Error with an empty message\n");
            std::abort();
        }
        return false;
    }
}

// A property the target checks on accepted input; failing it is a bug like a crash.
inline void require(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz: property violated: %s\n", what);
        std::abort();
    }
}

}  // namespace razor::fuzz
