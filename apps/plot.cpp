// apps/plot.cpp -- see plot.h.
#include "apps/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/safetensors.h"

namespace razor::apps {
namespace {
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '&') out += "&amp;";
        else out += c;
    }
    return out;
}
}  // namespace

void write_svg_plot(const std::string& path, const std::vector<Panel>& panels) {
    const double pw = 420, ph = 300, ml = 60, mr = 15, mt = 30, mb = 45;
    std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(pw * panels.size()) + "' height='" +
                      num(ph) + "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n";
    for (size_t p = 0; p < panels.size(); ++p) {
        const Panel& panel = panels[p];
        double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
        for (const Series& s : panel.series)
            for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
                if (!std::isfinite(s.y[i])) continue;
                x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
                y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
            }
        if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
        if (x1 == x0) x1 = x0 + 1;
        if (y1 == y0) y1 = y0 + 1;
        const double pad = 0.05 * (y1 - y0);
        y0 -= pad, y1 += pad;
        const double ox = p * pw, w = pw - ml - mr, h = ph - mt - mb;
        auto X = [&](double x) { return ox + ml + (x - x0) / (x1 - x0) * w; };
        auto Y = [&](double y) { return mt + (1 - (y - y0) / (y1 - y0)) * h; };
        svg += "<text x='" + num(ox + pw / 2) + "' y='18' text-anchor='middle' font-size='13'>" + escape(panel.title) + "</text>\n";
        svg += "<rect x='" + num(ox + ml) + "' y='" + num(mt) + "' width='" + num(w) + "' height='" + num(h) +
               "' fill='none' stroke='#888'/>\n";
        for (int t = 0; t <= 4; ++t) {
            const double yv = y0 + (y1 - y0) * t / 4, xv = x0 + (x1 - x0) * t / 4;
            svg += "<text x='" + num(ox + ml - 4) + "' y='" + num(Y(yv) + 4) + "' text-anchor='end'>" + num(yv) + "</text>\n";
            svg += "<line x1='" + num(ox + ml) + "' x2='" + num(ox + ml + w) + "' y1='" + num(Y(yv)) + "' y2='" +
                   num(Y(yv)) + "' stroke='#eee'/>\n";
            svg += "<text x='" + num(X(xv)) + "' y='" + num(mt + h + 15) + "' text-anchor='middle'>" + num(xv) + "</text>\n";
        }
        svg += "<text x='" + num(ox + ml + w / 2) + "' y='" + num(ph - 8) + "' text-anchor='middle'>" + escape(panel.xlabel) + "</text>\n";
        svg += "<text transform='translate(" + num(ox + 14) + "," + num(mt + h / 2) + ") rotate(-90)' text-anchor='middle'>" +
               escape(panel.ylabel) + "</text>\n";
        for (size_t k = 0; k < panel.series.size(); ++k) {
            const Series& s = panel.series[k];
            const char* color = kColors[k % 6];
            std::string pts;
            for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
                if (std::isfinite(s.y[i])) pts += num(X(s.x[i])) + "," + num(Y(s.y[i])) + " ";
            svg += "<polyline fill='none' stroke='" + std::string(color) + "' stroke-width='1.8' points='" + pts + "'/>\n";
            svg += "<text x='" + num(ox + ml + 8) + "' y='" + num(mt + 14 + 14 * k) + "' fill='" + color + "'>" +
                   escape(s.name) + "</text>\n";
        }
    }
    svg += "</svg>\n";
    write_file_atomic(path, svg);
}

}  // namespace razor::apps
