// core/ops/pool.h -- 2-D max, average and adaptive average pooling over (N, C, H, W) (or (C, H, W)).
//
// reference: torch.nn.functional.max_pool2d / avg_pool2d / adaptive_avg_pool2d (no dilation, ceil_mode=False).
// docs: docs/back-razor.md §5.3 (max-pool keeps 1 byte per output).
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace razor {

struct Pool2dOptions {
    std::array<int64_t, 2> kernel{2, 2};
    std::array<int64_t, 2> stride{0, 0};   // 0 = kernel
    std::array<int64_t, 2> padding{0, 0};  // at most half the kernel (as PyTorch)
};

// Saves the argmax position within each window as SaveRole::Indices: U8 for windows of <= 256 elements (1 byte per
// output, not the input), I64 for larger windows.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
// count_include_pad=true (PyTorch's default): every window divides by kernel[0]*kernel[1]. Saves nothing.
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options);
// Output cell (i, j) averages rows [floor(i*H/OH), ceil((i+1)*H/OH)) and the same for columns. Saves nothing.
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);

}  // namespace razor
