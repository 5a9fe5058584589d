// train/plot.cpp -- see plot.h.
#include "train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/safetensors.h"

namespace razor::train {
namespace {
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
constexpr double kCharWidth = 6.6;    // an 11 px sans-serif character, generously
constexpr size_t kMaxPoints = 1500;   // per polyline: longer series are thinned evenly

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

double text_width(const std::string& s) { return kCharWidth * static_cast<double>(s.size()); }

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

std::string text(double x, double y, const std::string& anchor, const std::string& s, const std::string& attrs = "") {
    return "<text x='" + num(x) + "' y='" + num(y) + "' text-anchor='" + anchor + "'" + attrs + ">" + escape(s) +
           "</text>\n";
}

// The data range of a panel's finite points.
struct Range {
    double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
};
Range range_of(const Panel& panel) {
    Range r;
    for (const Series& s : panel.series)
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
            if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
            r.x0 = std::min(r.x0, s.x[i]), r.x1 = std::max(r.x1, s.x[i]);
            r.y0 = std::min(r.y0, s.y[i]), r.y1 = std::max(r.y1, s.y[i]);
        }
    if (r.x0 > r.x1) r = {0, 1, 0, 1};
    if (panel.x_from_zero) r.x0 = std::min(r.x0, 0.0);
    if (std::isfinite(panel.x_to)) r.x1 = std::max(r.x1, panel.x_to);
    if (panel.y_from_zero) r.y0 = std::min(r.y0, 0.0);
    return r;
}

Ticks clamp_ticks(Ticks t, double lo, double hi) {
    std::vector<double> kept;
    for (double v : t.values)
        if (v >= lo - 1e-9 * t.step && v <= hi + 1e-9 * t.step) kept.push_back(v);
    t.values = kept;
    t.lo = std::max(t.lo, lo), t.hi = std::min(t.hi, hi);
    if (t.values.empty() || t.hi <= t.lo) t = nice_ticks(t.lo, t.lo + t.step);
    return t;
}
}  // namespace

Ticks nice_ticks(double lo, double hi, int target) {
    if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
    if (hi < lo) std::swap(lo, hi);
    const double scale = std::max(std::abs(lo), std::abs(hi));
    if (hi - lo <= 1e-9 * scale || hi == lo) {   // one value (to rounding): a range around it
        const double d = scale != 0 ? scale * 0.1 : 1;
        lo -= d, hi += d;
    }
    if (!std::isfinite(hi - lo)) lo = -std::numeric_limits<double>::max() / 4, hi = -lo;
    const double raw = (hi - lo) / std::max(target, 1);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    const double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    Ticks t;
    t.step = step;
    const double a = std::floor(lo / step + 1e-9), b = std::ceil(hi / step - 1e-9);
    t.lo = a * step, t.hi = b * step;
    const int64_t n = std::isfinite(b - a) ? std::llround(b - a) : 0;   // about `target`, whatever the values
    for (int64_t i = 0; i <= std::min<int64_t>(n, 4 * target + 4); ++i) {
        const double k = a + static_cast<double>(i);
        t.values.push_back(std::abs(k) < 0.5 ? 0.0 : k * step);
    }
    return t;
}

std::string tick_label(double value, double step) {
    char buf[32];
    const double big = std::max(std::abs(value), step);
    if (step < 1e-3 || big >= 1e6) {
        std::snprintf(buf, sizeof buf, "%.3g", value);
    } else {
        const int digits = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
        std::snprintf(buf, sizeof buf, "%.*f", digits, value);
    }
    return buf;
}

void write_svg_plot(const std::string& path, const std::vector<Panel>& panels) {
    const double pw = 420, ph = 320, mr = 15, mt = 58, mb = 45;
    std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(pw * panels.size()) + "' height='" +
                      num(ph) + "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n";
    for (size_t p = 0; p < panels.size(); ++p) {
        const Panel& panel = panels[p];
        const Range r = range_of(panel);
        const Ticks xt = nice_ticks(r.x0, r.x1);
        const Ticks yt = clamp_ticks(nice_ticks(r.y0, r.y1), panel.y_min, panel.y_max);
        double label_w = 0;
        for (double v : yt.values) label_w = std::max(label_w, text_width(tick_label(v, yt.step)));
        const double ml = std::max(40.0, label_w + 14);
        const double ox = p * pw, w = pw - ml - mr, h = ph - mt - mb;
        auto X = [&](double x) { return ox + ml + (x - xt.lo) / (xt.hi - xt.lo) * w; };
        auto Y = [&](double y) { return mt + (1 - (y - yt.lo) / (yt.hi - yt.lo)) * h; };
        svg += text(ox + pw / 2, 18, "middle", panel.title, " font-size='13' font-weight='bold'");
        // The y quantity above its tick labels; the legend on the same row, right-aligned, wrapping leftwards.
        svg += text(ox + 6, mt - 8, "start", panel.ylabel, " fill='#444'");
        double lx = ox + pw - mr, ly = mt - 8;
        const double legend_left = ox + 6 + text_width(panel.ylabel) + 12;
        for (size_t k = panel.series.size(); k-- > 0;) {
            const double item = text_width(panel.series[k].name) + 22;
            if (lx - item < legend_left) lx = ox + pw - mr, ly -= 14;   // a row above (below the title)
            const char* color = kColors[k % 6];
            svg += "<line x1='" + num(lx - item) + "' x2='" + num(lx - item + 14) + "' y1='" + num(ly - 4) +
                   "' y2='" + num(ly - 4) + "' stroke='" + color + "' stroke-width='2'/>\n";
            svg += text(lx - item + 18, ly, "start", panel.series[k].name, std::string(" fill='") + color + "'");
            lx -= item + 8;
        }
        svg += "<rect x='" + num(ox + ml) + "' y='" + num(mt) + "' width='" + num(w) + "' height='" + num(h) +
               "' fill='none' stroke='#888'/>\n";
        for (double v : yt.values) {
            svg += text(ox + ml - 5, Y(v) + 4, "end", tick_label(v, yt.step));
            svg += "<line x1='" + num(ox + ml) + "' x2='" + num(ox + ml + w) + "' y1='" + num(Y(v)) + "' y2='" +
                   num(Y(v)) + "' stroke='#eee'/>\n";
        }
        for (double v : xt.values) {
            svg += text(X(v), mt + h + 15, "middle", tick_label(v, xt.step));
            svg += "<line x1='" + num(X(v)) + "' x2='" + num(X(v)) + "' y1='" + num(mt + h) + "' y2='" +
                   num(mt + h + 4) + "' stroke='#888'/>\n";
        }
        svg += text(ox + ml + w / 2, ph - 10, "middle", panel.xlabel);
        for (size_t k = 0; k < panel.series.size(); ++k) {
            const Series& s = panel.series[k];
            const char* color = kColors[k % 6];
            std::vector<std::pair<double, double>> pts;
            for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
                if (std::isfinite(s.y[i]) && std::isfinite(s.x[i])) pts.emplace_back(X(s.x[i]), Y(s.y[i]));
            const size_t stride = (pts.size() + kMaxPoints - 1) / kMaxPoints;
            std::string line;
            for (size_t i = 0; i < pts.size(); ++i)
                if (i % std::max<size_t>(stride, 1) == 0 || i + 1 == pts.size())
                    line += num(pts[i].first) + "," + num(pts[i].second) + " ";
            if (pts.size() > 1)
                svg += "<polyline fill='none' stroke='" + std::string(color) + "' stroke-width='1.6' points='" + line +
                       "'/>\n";
            if (s.markers || pts.size() == 1)
                for (const auto& [px, py] : pts)
                    svg += "<circle cx='" + num(px) + "' cy='" + num(py) + "' r='3' fill='" + color + "'/>\n";
        }
    }
    svg += "</svg>\n";
    write_file_atomic(path, svg);
}

void write_svg_bars(const std::string& path, const std::string& title, const std::vector<std::string>& categories,
                    const std::vector<BarSeries>& series, const std::function<std::string(double)>& label) {
    const double bar = 12, gap = 10, plot_w = 420, top = 44;
    double label_w = 60, value_w = 40;
    for (const std::string& c : categories) label_w = std::max(label_w, text_width(c) + 12);
    for (const BarSeries& s : series)
        for (double v : s.values) value_w = std::max(value_w, text_width(label(std::isfinite(v) ? v : 0)) + 10);
    const double group = bar * std::max<size_t>(series.size(), 1) + gap;
    const double title_w = 13.0 / 11.0 * text_width(title) + 20;
    const double width = std::ceil(std::max(label_w + plot_w + value_w, title_w)), height = top + group * categories.size() + 20;
    double vmax = 0;
    for (const BarSeries& s : series)
        for (double v : s.values)
            if (std::isfinite(v)) vmax = std::max(vmax, v);
    if (vmax <= 0) vmax = 1;
    std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(width) + "' height='" + num(height) +
                      "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n";
    svg += text(width / 2, 17, "middle", title, " font-size='13' font-weight='bold'");
    double lx = label_w;
    for (size_t k = 0; k < series.size(); ++k) {   // legend
        svg += "<rect x='" + num(lx) + "' y='26' width='10' height='10' fill='" + kColors[k % 6] + "'/>\n" +
               text(lx + 14, 35, "start", series[k].name);
        lx += 14 + text_width(series[k].name) + 20;
    }
    for (size_t c = 0; c < categories.size(); ++c) {
        const double y0 = top + group * c;
        svg += text(label_w - 6, y0 + group / 2, "end", categories[c]);
        for (size_t k = 0; k < series.size(); ++k) {
            const double v = c < series[k].values.size() && std::isfinite(series[k].values[c]) ? series[k].values[c] : 0;
            const double w = plot_w * v / vmax, y = y0 + bar * k;
            svg += "<rect x='" + num(label_w) + "' y='" + num(y) + "' width='" + num(w) + "' height='" + num(bar - 1) +
                   "' fill='" + kColors[k % 6] + "'/>\n";
            svg += text(label_w + w + 4, y + bar - 3, "start", label(v));
        }
    }
    svg += "<line x1='" + num(label_w) + "' x2='" + num(label_w) + "' y1='" + num(top - 2) + "' y2='" +
           num(height - 18) + "' stroke='#888'/>\n</svg>\n";
    write_file_atomic(path, svg);
}

}  // namespace razor::train
