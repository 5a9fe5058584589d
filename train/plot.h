// train/plot.h -- small SVG line charts (training curves), written next to the JSONL log. No dependencies: an SVG
// opens in any browser and renders in GitHub.
#pragma once

#include <string>
#include <vector>

namespace razor::train {

struct Series {
    std::string name;
    std::vector<double> x, y;
};

struct Panel {
    std::string title, xlabel, ylabel;
    std::vector<Series> series;
};

// Panels side by side in one SVG file, written atomically. Throws razor::Error naming the path on failure.
void write_svg_plot(const std::string& path, const std::vector<Panel>& panels);

// A horizontal grouped bar chart: one group of bars per category (top to bottom), one bar per series (same colour
// across groups), values labelled at the bar ends with `unit`. Written atomically, like write_svg_plot.
struct BarSeries {
    std::string name;
    std::vector<double> values;   // one per category
};
void write_svg_bars(const std::string& path, const std::string& title, const std::string& unit,
                    const std::vector<std::string>& categories, const std::vector<BarSeries>& series);

}  // namespace razor::train
