// tests/models/test_summary_kernels.cpp -- razor info's per-layer table names the kernel each conv runs
// (models::summarize / format_summary, from select_algorithm), as this build runs it.
#include <map>

#include "core/isa.h"
#include "models/registry.h"
#include "models/summary.h"
#include "support/gradcheck.h"

using namespace razor;

TEST_CASE("models: summary (razor info) names each conv's kernel, as this build runs it") {
    const bool simd = active_isa() != Isa::Generic;   // avx2 and avx512 run the same kernels here
    Generator gen(0);
    auto model = models::make_model("resnet20", 10, gen);
    const models::ModelSummary s = models::summarize(*model, {2, 3, 32, 32});
    std::map<std::string, const models::LayerSummary*> rows;
    for (const auto& row : s.layers) rows[row.path] = &row;
    // The stem (3 channels: too few for Winograd), a stage-1 conv at 32x32, the stride-2 conv into stage 2, and a
    // stage-3 conv at 8x8 (several images per GEMM under generic).
    CHECK(rows.at("conv1")->kernel == (simd ? "padded-planes" : "im2col"));
    CHECK(rows.at("layer1.0.conv1")->kernel == (simd ? "winograd-f2x3" : "im2col"));
    CHECK(rows.at("layer2.0.conv1")->kernel == "im2col");
    CHECK(rows.at("layer3.2.conv2")->kernel == (simd ? "winograd-f2x3" : "im2col-batched"));
    CHECK(rows.at("bn1")->kernel.empty());   // not a conv
    // Each conv row is exactly what select_algorithm says for its geometry.
    const ConvGeometry g = conv2d_geometry({2, 16, 32, 32}, {16, 16, 3, 3}, Conv2dOptions{{1, 1}, {1, 1}, {1, 1}, 1});
    CHECK(rows.at("layer1.1.conv2")->kernel == conv_algorithms_str(select_algorithm(g)));

    const std::string table = models::format_summary(s);
    CHECK(table.find("kernel") != std::string::npos);
    size_t line = table.find("layer1.0.conv1");
    REQUIRE(line != std::string::npos);
    const std::string row = table.substr(line, table.find('\n', line) - line);
    CHECK(row.find(simd ? "winograd-f2x3" : "im2col") != std::string::npos);
}
