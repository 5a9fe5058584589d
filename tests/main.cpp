// tests/main.cpp -- doctest entry point. Tests fail through the exit code.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "core/runtime.h"

int main(int argc, char** argv) {
    razor::set_num_threads(2);
    std::printf("%s\n", razor::runtime_banner().c_str());
    doctest::Context context(argc, argv);
    return context.run();
}
