// apps/plot.h -- small SVG line charts (training curves), written next to the JSONL log. No dependencies: an SVG
// opens in any browser and renders in GitHub.
#pragma once

#include <string>
#include <vector>

namespace razor::apps {

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

}  // namespace razor::apps
