// train/run_log.cpp -- see run_log.h.
#include "train/run_log.h"

#include <cmath>
#include <filesystem>

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
    for (const nlohmann::json& j : trim_log(path, keep))
        if (!plot_path_.empty()) curves_.add(j);
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
