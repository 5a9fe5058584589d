// tests/train/test_plot.cpp -- the curves a person looks at: nice ticks, per-step (smoothed) loss and lr, axes that
// never go negative, legends and labels that do not overlap, titles that fit; every SVG rendered to PNG with
// rsvg-convert (Debian's librsvg2-bin) and the PNG's size checked. Also the progress line's width.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/core.h"
#include "data/test_support.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/run_log.h"
#include "train/step_curve.h"

using namespace razor;
using namespace razor::train;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool have_rsvg() { return std::system("command -v rsvg-convert >/dev/null 2>&1") == 0; }

// Renders `svg` to `png` and checks the PNG is non-empty with the SVG's width and height. Skips (with a message)
// only when rsvg-convert is absent.
void check_renders(const std::string& svg, const std::string& png, int width, int height) {
    if (!have_rsvg()) {
        MESSAGE("rsvg-convert not found (Debian: apt-get install librsvg2-bin, scripts/setup.sh): render check of ",
                svg, " skipped");
        return;
    }
    REQUIRE(std::system(("rsvg-convert -o '" + png + "' '" + svg + "'").c_str()) == 0);
    const std::string bytes = read_text(png);
    REQUIRE(bytes.size() > 1000);   // an empty picture of this size compresses to a few hundred bytes
    REQUIRE(bytes.compare(1, 3, "PNG") == 0);
    const auto be32 = [&](size_t at) {
        return (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at])) << 24) |
               (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
               (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
               static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
    };
    CHECK(be32(16) == static_cast<uint32_t>(width));    // IHDR width, height
    CHECK(be32(20) == static_cast<uint32_t>(height));
}

// The epoch entries of a run of `epochs` epochs of `steps` steps: a falling loss, a rising accuracy, a one-cycle-ish
// lr, run through StepCurve as fit() does.
std::vector<json> fake_run(int epochs, int steps, bool sparse = false) {
    std::vector<json> out;
    StepCurve curve;
    int64_t global = 0;
    for (int e = 1; e <= epochs; ++e) {
        for (int k = 1; k <= steps; ++k) {
            ++global;
            const double t = static_cast<double>(global) / (epochs * steps);
            curve.add(k, steps, 2.3 * std::exp(-2 * t) + 0.1 * std::sin(global), 0.1 + 0.8 * t,
                      0.1 * std::sin(3.14159 * t) + 0.004);
        }
        json j = {{"epoch", e}, {"epochs", epochs}, {"loss", 2.3 * std::exp(-2.0 * e / epochs)},
                  {"train_acc", 0.1 + 0.8 * e / epochs}, {"lr", 0.05}, {"curve", curve_json(curve.take())}};
        if (sparse) j["phase"] = "A", j["expected_keep"] = 1 - 0.5 * e / epochs, j["test_acc_sampled"] = 0.5;
        else j["test_acc"] = 0.2 + 0.6 * e / epochs, j["test_loss"] = 2.0 * std::exp(-1.5 * e / epochs);
        out.push_back(j);
    }
    return out;
}

}  // namespace

TEST_CASE("plot: ticks are nice numbers (1, 2, 5 x 10^k) that cover the data; labels carry the step's digits") {
    const Ticks a = nice_ticks(0, 4.792);
    CHECK(a.step == 1);
    CHECK(a.values == std::vector<double>{0, 1, 2, 3, 4, 5});
    const Ticks b = nice_ticks(0, 0.0812);
    CHECK(b.step == doctest::Approx(0.02));
    CHECK(b.lo == 0);
    CHECK(b.hi == doctest::Approx(0.1));
    CHECK(tick_label(b.values[1], b.step) == "0.02");
    CHECK(tick_label(b.values.back(), b.step) == "0.10");
    const Ticks c = nice_ticks(12.3, 87.9);
    CHECK(c.step == 20);
    CHECK(c.lo == 0);
    CHECK(c.hi == 100);
    CHECK(tick_label(40, 20) == "40");
    CHECK(tick_label(2e-5, 1e-5) == "2e-05");
    // values of a diverged run: huge, equal to rounding, or spanning all doubles -- still a handful of ticks
    for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{{1e30, 1e30 * (1 + 1e-16)}, {-1e308, 1e308},
                                                                        {3e38, 3e38}}) {
        const Ticks t = nice_ticks(lo, hi);
        CHECK(t.values.size() >= 2);
        CHECK(t.values.size() <= 24);
    }
    const Ticks one = nice_ticks(3, 3);   // a single value gets a range around it
    CHECK(one.lo < 3);
    CHECK(one.hi > 3);
    for (const Ticks& t : {a, b, c, one}) {
        const double m = t.step / std::pow(10.0, std::floor(std::log10(t.step) + 1e-9));
        CHECK((std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 5) < 1e-9));
    }
}

TEST_CASE("StepCurve: the bias-corrected EMA, at most kCurvePoints samples an epoch and the epoch's last step") {
    StepCurve c;
    for (int k = 1; k <= 1000; ++k) c.add(k, 1000, 2.0, 0.5, 0.1);
    const auto p = c.take();
    CHECK(p.size() == 100);
    CHECK(p.back().at == 1.0);
    for (const CurvePoint& q : p) CHECK(q.loss == doctest::Approx(2.0));   // no pull towards 0 at the start
    CHECK(c.take().empty());
    for (int k = 1; k <= 3; ++k) c.add(k, 3, k == 1 ? 1.0 : 3.0, std::nan(""), 0.2);
    const auto q = c.take();
    REQUIRE(q.size() == 3);
    CHECK(q[0].loss < q[2].loss);
    CHECK(std::isnan(q[0].accuracy));
    const auto back = curve_from_json({{"curve", curve_json(q)}});
    REQUIRE(back.size() == 3);
    CHECK(back[2].at == 1.0);
    CHECK(back[2].loss == doctest::Approx(q[2].loss));
    CHECK(std::isnan(back[1].accuracy));
    CHECK(curve_from_json({{"epoch", 1}}).empty());   // an entry of an older log
}

TEST_CASE("Curves: a 1-epoch run gets per-step loss, accuracy and lr panels; lr from 0; PNGs render") {
    test::TempDir dir("razor_plot");
    for (int epochs : {1, 5}) {
        INFO("epochs ", epochs);
        Curves curves;
        for (const json& j : fake_run(epochs, 40)) curves.add(j);
        const auto panels = curves.panels();
        REQUIRE(panels.size() == 3);
        CHECK(panels[0].series[0].name == "train (smoothed)");
        CHECK(panels[0].series[0].x.size() == static_cast<size_t>(40 * epochs));   // one sample per step here
        CHECK(panels[1].y_max == 100);
        CHECK(panels[2].y_from_zero);
        CHECK(panels[2].series[0].x.size() == static_cast<size_t>(40 * epochs));
        const std::string svg = dir / ("curves" + std::to_string(epochs) + ".svg");
        curves.write(svg);
        const std::string text = read_text(svg);
        CHECK(text.find("rotate") == std::string::npos);      // no rotated label to overlap the ticks
        CHECK(text.find(">-") == std::string::npos);           // no negative tick anywhere (loss, %, lr)
        CHECK(text.find("4.792") == std::string::npos);
        check_renders(svg, dir / ("curves" + std::to_string(epochs) + ".png"), 3 * 420, 320);
    }
    // sparse-train: phase A then B, with the kept fraction.
    Curves sparse;
    for (const json& j : fake_run(3, 20, true)) sparse.add(j);
    sparse.add({{"phase", "B-select"}, {"candidate", 1}, {"train_acc", 0.5}});   // no epoch: left out
    for (json j : fake_run(2, 20)) {
        j["phase"] = "B";
        sparse.add(j);
    }
    const auto panels = sparse.panels();
    REQUIRE(panels.size() == 4);
    CHECK(panels[3].title == "kept fraction");
    CHECK(panels[3].x_to == doctest::Approx(5.0));   // the same epoch axis as the other panels
    CHECK(panels[0].series[0].x.back() == doctest::Approx(5.0));   // B's epoch 2 follows A's 3 epochs
    const std::string svg = dir / "sparse.svg";
    sparse.write(svg);
    check_renders(svg, dir / "sparse.png", 4 * 420, 320);
}

TEST_CASE("write_svg_bars: the picture is as wide as its title; values through the label function (bytes)") {
    test::TempDir dir("razor_bars");
    const std::string title = "resnet20 tape at batch 1, 32 px: stored vs dense-equivalent bytes per op family, "
                              "largest first (Back Razor r = 0.8)";
    const std::string svg = dir / "tape.svg";
    write_svg_bars(svg, title, {"conv2d", "batch_norm2d", "total"},
                   {{"dense", {1543.0, 1.5e6, 1.6e6}}, {"stored", {400.0, 3e5, 3.1e5}}},
                   [](double b) { return format_bytes(std::llround(b)); });
    const std::string text = read_text(svg);
    CHECK(text.find("1.5 KiB") != std::string::npos);
    CHECK(text.find("400 B") != std::string::npos);
    CHECK(text.find("0.00") == std::string::npos);
    const auto w = text.find("width='");
    const double width = std::stod(text.substr(w + 7));
    CHECK(width >= 13.0 / 11.0 * 6.6 * title.size());
    check_renders(svg, dir / "tape.png", static_cast<int>(std::lround(width)), 44 + 3 * 34 + 20);
}

TEST_CASE("progress: the line fits the width (80 columns when unknown), the tail goes first, then the bar shrinks") {
    ProgressState s{"epoch 12/200", 1234, 39062, 0.61234, 0.781, 1210, 3600,
                    "tape 12.1 MiB (dense 48.4 MiB, 4.0x)"};
    const std::string narrow = progress_text(s, 80);
    CHECK(narrow.size() <= 79);
    CHECK(narrow.find("loss 0.6123") != std::string::npos);
    CHECK(narrow.find("tape") == std::string::npos);   // dropped whole, not cut
    const std::string wide = progress_text(s, 200);
    CHECK(wide.find("tape 12.1 MiB (dense 48.4 MiB, 4.0x)") != std::string::npos);
    CHECK(wide.size() <= 199);
    const auto bar = [](const std::string& line) { return line.find(']') - line.find('[') - 1; };
    CHECK(bar(wide) == 24);
    CHECK(bar(narrow) >= 10);
    s.label = std::string(90, 'x');   // even then: cut to the width
    CHECK(progress_text(s, 80).size() == 79);
    CHECK(progress_columns() >= 80);
}
