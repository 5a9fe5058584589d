// train/run_log.cpp -- see run_log.h.
#include "train/run_log.h"

#include <filesystem>

#include "core/check.h"
#include "core/safetensors.h"

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
    const double e = j.at("epoch").get<double>();
    loss_.x.push_back(e), loss_.y.push_back(j.at("loss").get<double>());
    train_.x.push_back(e), train_.y.push_back(100 * j.at("train_acc").get<double>());
    lr_.x.push_back(e), lr_.y.push_back(j.at("lr").get<double>());
    if (!j.at("test_acc").is_null()) {
        test_.x.push_back(e), test_.y.push_back(100 * j.at("test_acc").get<double>());
        test_loss_.x.push_back(e), test_loss_.y.push_back(j.at("test_loss").get<double>());
    }
}

void Curves::write(const std::string& path) const {
    write_svg_plot(path, {{"loss", "epoch", "cross-entropy", {loss_, test_loss_}},
                          {"accuracy", "epoch", "%", {train_, test_}},
                          {"learning rate", "epoch", "lr", {lr_}}});
}

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
