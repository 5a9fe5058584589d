// train/plot.cpp -- see plot.h.
#include "train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/safetensors.h"

namespace razor::train {
namespace {
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

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

void write_svg_bars(const std::string& path, const std::string& title, const std::string& unit,
                    const std::vector<std::string>& categories, const std::vector<BarSeries>& series) {
    const double bar = 12, gap = 10, label_w = 170, plot_w = 420, value_w = 90, top = 40;
    const double group = bar * std::max<size_t>(series.size(), 1) + gap;
    const double width = label_w + plot_w + value_w, height = top + group * categories.size() + 20;
    double vmax = 0;
    for (const BarSeries& s : series)
        for (double v : s.values)
            if (std::isfinite(v)) vmax = std::max(vmax, v);
    if (vmax <= 0) vmax = 1;
    std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(width) + "' height='" + num(height) +
                      "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n";
    svg += "<text x='" + num(width / 2) + "' y='16' text-anchor='middle' font-size='13'>" + escape(title) + "</text>\n";
    for (size_t k = 0; k < series.size(); ++k)   // legend
        svg += "<rect x='" + num(label_w + 150 * k) + "' y='24' width='10' height='10' fill='" + kColors[k % 6] +
               "'/><text x='" + num(label_w + 150 * k + 14) + "' y='33'>" + escape(series[k].name) + "</text>\n";
    for (size_t c = 0; c < categories.size(); ++c) {
        const double y0 = top + group * c;
        svg += "<text x='" + num(label_w - 6) + "' y='" + num(y0 + group / 2) + "' text-anchor='end'>" +
               escape(categories[c]) + "</text>\n";
        for (size_t k = 0; k < series.size(); ++k) {
            const double v = c < series[k].values.size() && std::isfinite(series[k].values[c]) ? series[k].values[c] : 0;
            const double w = plot_w * v / vmax, y = y0 + bar * k;
            svg += "<rect x='" + num(label_w) + "' y='" + num(y) + "' width='" + num(w) + "' height='" + num(bar - 1) +
                   "' fill='" + kColors[k % 6] + "'/>\n";
            svg += "<text x='" + num(label_w + w + 4) + "' y='" + num(y + bar - 3) + "'>" + num(v) + " " +
                   escape(unit) + "</text>\n";
        }
    }
    svg += "<line x1='" + num(label_w) + "' x2='" + num(label_w) + "' y1='" + num(top - 2) + "' y2='" +
           num(height - 18) + "' stroke='#888'/>\n</svg>\n";
    write_file_atomic(path, svg);
}

}  // namespace razor::train
