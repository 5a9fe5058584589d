// tests/fuzz/fuzz_pytorch.cpp -- libFuzzer target: bytes -> parse_pytorch (core/pytorch_file.h), the zip container and
// the restricted unpickler together. Accepted input must give a non-empty state dict of well-formed tensors.
#include "core/pytorch_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    SafeTensors st;
    if (!fuzz::accepts([&] { st = parse_pytorch(fuzz::bytes(data, size), "fuzz.pth"); })) return 0;
    fuzz::require(!st.tensors.empty(), "an accepted file holds at least one tensor");
    for (const auto& [name, t] : st.tensors)
        fuzz::require(t.is_contiguous() && t.numel() == shape_numel(t.shape()), "tensors come out contiguous");
    return 0;
}
