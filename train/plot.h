// train/plot.h -- small SVG line and bar charts (training curves, tape memory), written next to the JSONL log. No
// dependencies: an SVG opens in any browser and renders in GitHub (and to PNG with rsvg-convert).
//
// Layout, so that nothing overlaps: per panel a title row, a row with the y quantity on the left and the legend on
// the right, then the plot; the left margin is as wide as the widest tick label. Ticks are "nice" numbers (1, 2 or 5
// times a power of ten) and the axes end on ticks. docs: docs/cli.md "Curves".
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace razor::train {

struct Series {
    std::string name;
    std::vector<double> x, y;   // points with a non-finite y are left out
    bool markers = false;       // a dot on every point (per-epoch values: a one-epoch run still shows them)
};

struct Panel {
    std::string title, xlabel, ylabel;
    std::vector<Series> series;
    // The axes never extend past these (a loss or lr axis is never negative, accuracy never above 100 %).
    double y_min = -std::numeric_limits<double>::infinity(), y_max = std::numeric_limits<double>::infinity();
    bool y_from_zero = false;   // the y axis starts at 0 (an lr schedule's shape)
    bool x_from_zero = false;   // the x axis starts at 0 (epochs: the run's start)
    double x_to = -std::numeric_limits<double>::infinity();   // the x axis reaches at least this far (panels alike)
};

// Panels side by side in one SVG file, written atomically. Throws razor::Error naming the path on failure.
void write_svg_plot(const std::string& path, const std::vector<Panel>& panels);

// The ticks of an axis over [lo, hi]: a step of 1, 2 or 5 x 10^k giving about `target` intervals, from the multiple
// of the step at or below lo to the one at or above hi. lo == hi gets a range around it.
struct Ticks {
    double lo = 0, hi = 1, step = 1;
    std::vector<double> values;
};
Ticks nice_ticks(double lo, double hi, int target = 5);
// A tick's label with the digits its step needs ("0.02", "5", "1e-05").
std::string tick_label(double value, double step);

// A horizontal grouped bar chart: one group of bars per category (top to bottom), one bar per series (same colour
// across groups), each bar labelled at its end with label(value) (e.g. format_bytes). The picture is as wide as the
// title needs. Written atomically, like write_svg_plot.
struct BarSeries {
    std::string name;
    std::vector<double> values;   // one per category
};
void write_svg_bars(const std::string& path, const std::string& title, const std::vector<std::string>& categories,
                    const std::vector<BarSeries>& series, const std::function<std::string(double)>& label);

}  // namespace razor::train
