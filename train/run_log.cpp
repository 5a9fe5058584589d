// train/run_log.cpp -- see run_log.h.
#include "train/run_log.h"

#include <cmath>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/check.h"
#include "core/safetensors.h"
#include "train/step_curve.h"

namespace razor::train {
namespace fs = std::filesystem;

std::vector<nlohmann::json> trim_log(const std::string& path,
                                     const std::function<bool(const nlohmann::json&)>& keep) {
    std::vector<nlohmann::json> kept;
    std::string text;
    if (keep && fs::exists(path)) {
        std::ifstream in(path);
        std::string line;
        while (std::getline(in, line)) {
            if (line.empty()) continue;
            nlohmann::json j;
            try {
                j = nlohmann::json::parse(line);
            } catch (const nlohmann::json::exception&) {
                continue;   // a torn last line from a killed run
            }
            if (!j.is_object() || !keep(j)) continue;
            kept.push_back(j);
            text += line + "\n";
        }
    }
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent);
    write_file_atomic(path, text);
    return kept;
}

namespace {

// The offset of the first byte of `s` that does not continue valid UTF-8 (RFC 3629: no overlongs, no surrogates,
// at most U+10FFFF), or npos.
size_t first_invalid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t n = 0;
        uint32_t cp = 0, min = 0;
        if (c < 0x80) n = 0, cp = c;
        else if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07, min = 0x10000;
        else return i;
        for (size_t k = 1; k <= n; ++k) {
            if (i + k >= s.size()) return i;
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n + 1;
    }
    return std::string::npos;
}

}  // namespace

void require_utf8(const std::string& what, const std::string& text, const std::string& hint) {
    const size_t bad = first_invalid_utf8(text);
    if (bad == std::string::npos) return;
    std::string shown;
    for (unsigned char c : text) {
        if (c >= 0x20 && c < 0x7F) shown += static_cast<char>(c);
        else shown += fmt("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    }
    throw Error(fmt(what, " '", shown, "' is not valid UTF-8 (byte ", bad, "); expected UTF-8 text, as the JSON log "
                    "and the checkpoint metadata hold it; hint: ", hint));
}

void check_log_path(const std::string& command, const std::string& path, bool fresh, bool overwrite) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec && ec.value() != ENOENT)
        throw Error(fmt(command, ": --log ", path, " cannot be read (", ec.message(), "); hint: pick another --log"));
    if (!fs::exists(st)) return;
    if (!fs::is_regular_file(st))
        throw Error(fmt(command, ": --log ", path, " is not a file; expected a JSONL log; hint: pick another --log"));
    const std::string text = read_file(path);
    size_t start = 0, line = 0;
    while (start < text.size()) {
        const size_t end = text.find('\n', start);
        if (end == std::string::npos) break;   // a torn last line: what a killed run leaves
        ++line;
        const std::string_view l(text.data() + start, end - start);
        start = end + 1;
        if (l.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(l, nullptr, false);
        if (!j.is_object())
            throw Error(fmt(command, ": --log ", path, " is not a razor run log (line ", line, " is not a JSON "
                            "object); razor never rewrites a file it did not write; hint: pick another --log"));
    }
    if (fresh && !overwrite && !text.empty())
        throw Error(fmt(command, ": --log ", path, " already holds a run's log; hint: continue that run with --resume, "
                        "pick another --log, or pass --overwrite to start over (the old log is kept aside until the "
                        "new run's first checkpoint)"));
}

void Curves::add(const nlohmann::json& j) {
    if (!j.contains("epoch") || !j["epoch"].is_number() || !j.contains("loss") || !j["loss"].is_number()) return;
    const std::string phase = j.contains("phase") && j["phase"].is_string() ? j["phase"].get<std::string>() : "";
    if (phase != phase_) offset_ = last_x_, phase_ = phase;
    const double e = offset_ + j["epoch"].get<double>();
    last_x_ = e;
    const auto number = [&](const char* key) {
        return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
    };
    loss_.x.push_back(e), loss_.y.push_back(number("loss"));
    train_.x.push_back(e), train_.y.push_back(100 * number("train_acc"));
    if (j.contains("eval_split") && j["eval_split"].is_string())   // the legend names the split evaluated
        test_.name = test_loss_.name = j["eval_split"].get<std::string>();
    const double test = j.contains("test_acc_sampled") ? number("test_acc_sampled") : number("test_acc");
    if (std::isfinite(test)) test_.x.push_back(e), test_.y.push_back(100 * test);
    if (std::isfinite(number("test_loss"))) test_loss_.x.push_back(e), test_loss_.y.push_back(number("test_loss"));
    if (std::isfinite(number("expected_keep"))) keep_.x.push_back(e), keep_.y.push_back(number("expected_keep"));
    const std::vector<CurvePoint> curve = curve_from_json(j);
    for (const CurvePoint& p : curve) {
        const double x = e - 1 + p.at;
        loss_step_.x.push_back(x), loss_step_.y.push_back(p.loss);
        acc_step_.x.push_back(x), acc_step_.y.push_back(100 * p.accuracy);
        lr_.x.push_back(x), lr_.y.push_back(p.lr);
    }
    if (curve.empty() && std::isfinite(number("lr"))) lr_.x.push_back(e), lr_.y.push_back(number("lr"));
}

std::vector<Panel> Curves::panels() const {
    const auto with = [](std::initializer_list<const Series*> all) {
        std::vector<Series> out;
        for (const Series* s : all)
            if (!s->x.empty()) out.push_back(*s);
        return out;
    };
    std::vector<Panel> p = {
        {.title = "loss", .xlabel = "epoch", .ylabel = "cross-entropy", .series = with({&loss_step_, &loss_, &test_loss_}),
         .y_min = 0, .x_from_zero = true},
        {.title = "accuracy", .xlabel = "epoch", .ylabel = "%", .series = with({&acc_step_, &train_, &test_}),
         .y_min = 0, .y_max = 100, .x_from_zero = true},
        {.title = "learning rate", .xlabel = "epoch", .ylabel = "lr", .series = with({&lr_}), .y_min = 0,
         .y_from_zero = true, .x_from_zero = true}};
    if (!keep_.x.empty())
        p.push_back({.title = "kept fraction", .xlabel = "epoch", .ylabel = "E[keep] of s", .series = {keep_},
                     .y_min = 0, .y_max = 1, .y_from_zero = true, .x_from_zero = true, .x_to = last_x_});   // phase A's only
    return p;
}

void Curves::write(const std::string& path) const { write_svg_plot(path, panels()); }

RunLog::RunLog(const std::string& command, const std::string& path,
               const std::function<bool(const nlohmann::json&)>& keep, const std::string& plot_path)
    : path_(path), plot_path_(plot_path) {
    for (const nlohmann::json& j : trim_log(path, keep)) {
        if (plot_path_.empty()) continue;
        try {
            curves_.add(j);
        } catch (const nlohmann::json::exception& e) {
            throw Error(fmt(command, ": ", path, ": the entry ", j.dump().substr(0, 120), " lacks an epoch field (",
                            e.what(), "); expected the log razor wrote; hint: pick another --log, or start over "
                            "with --overwrite"));
        }
    }
    out_.open(path, std::ios::app);
    if (!out_) throw Error(fmt(command, ": cannot open ", path, " for writing; hint: check --log / --out"));
}

void RunLog::write(const nlohmann::json& entry) {
    out_ << entry.dump() << "\n" << std::flush;
    if (plot_path_.empty()) return;
    curves_.add(entry);
    curves_.write(plot_path_);
}

}  // namespace razor::train
