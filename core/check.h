// core/check.h -- razor's two kinds of failure.
//
// razor::Error   a user error (bad shape, bad argument, bad file). Thrown with a message that names the op or
//                file, the expected and the actual value, and a hint. Catch it at the CLI boundary.
// RAZOR_CHECK    an internal invariant (inconsistent tape, unsorted index list). Reports file and line. Stays on
//                in Release builds: every check here is cheap next to the kernels it guards.
//
// Usage:
//   RAZOR_CHECK(n >= 0) << "negative size " << n;
//   RAZOR_CHECK_EQ(a.numel(), b.numel()) << "while packing " << name;
//   throw razor::Error(razor::fmt("linear: expected x (M, ", in, "), got ", shape_str(x.shape())));
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace razor {

// A user-facing error: op/file, expected vs got, and a hint for the fix.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// fmt("a", 1, "b") -> "a1b". Small helper so error sites stay one readable line.
template <class... Args>
std::string fmt(const Args&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}

namespace detail {
// Collects the streamed message and throws from its destructor (the end of the full expression).
class CheckFailure {
public:
    CheckFailure(const char* file, int line, const char* condition) {
        os_ << "razor internal check failed: " << condition << " at " << file << ":" << line << ": ";
    }
    template <class T>
    CheckFailure& operator<<(const T& value) {
        os_ << value;
        return *this;
    }
    [[noreturn]] ~CheckFailure() noexcept(false) { throw Error(os_.str()); }

private:
    std::ostringstream os_;
};
}  // namespace detail

}  // namespace razor

#define RAZOR_CHECK(cond) \
    if (cond) {           \
    } else                \
        ::razor::detail::CheckFailure(__FILE__, __LINE__, #cond)

#define RAZOR_CHECK_EQ(a, b)                                             \
    if ((a) == (b)) {                                                    \
    } else                                                               \
        ::razor::detail::CheckFailure(__FILE__, __LINE__, #a " == " #b) \
            << "(" << (a) << " vs " << (b) << ") "
