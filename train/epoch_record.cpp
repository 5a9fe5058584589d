// train/epoch_record.cpp -- see epoch_record.h.
#include "train/epoch_record.h"

#include <cstdio>

#include "core/core.h"

namespace razor::train {

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

std::string general(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

std::string seconds_text(const EpochSummary& r) {
    return fixed(r.seconds, 0) + " s" + (r.eval ? " + eval " + fixed(r.eval->seconds, 0) + " s" : std::string());
}

nlohmann::json epoch_json(const EpochSummary& r) {
    const int64_t stored = r.tape.stored_bytes, dense = r.tape.dense_bytes;
    nlohmann::json j = {{"epoch", r.epoch},         {"epochs", r.epochs},
                        {"step", r.step},           {"loss", r.loss},
                        {"train_acc", r.train_acc}, {"test_acc", nullptr},
                        {"test_loss", nullptr},     {"lr", r.lr},
                        {"seconds", r.seconds},     {"eval_seconds", r.eval ? r.eval->seconds : 0.0},
                        {"img_per_s", r.img_per_s}, {"tape_bytes", stored},
                        {"tape_dense_bytes", dense},
                        {"tape_ratio", stored ? double(dense) / stored : 0.0},
                        {"rss_bytes", r.rss_bytes}, {"peak_rss_bytes", r.peak_rss_bytes},
                        {"peak_tensor_bytes", r.peak_tensor_bytes}};
    if (r.eval) j["test_acc"] = r.eval->accuracy, j["test_loss"] = r.eval->loss, j["test_images"] = r.eval->images;
    if (r.eval_split != "test") j["eval_split"] = r.eval_split;   // test_* then hold the validation split's figures
    if (r.skipped) j["skipped_steps"] = r.skipped;
    return j;
}

std::string epoch_line(const EpochSummary& r) {
    const double ratio = r.tape.stored_bytes ? double(r.tape.dense_bytes) / r.tape.stored_bytes : 0;
    return fmt("epoch ", r.epoch, "/", r.epochs, "  loss ", fixed(r.loss, 4), "  train ", fixed(100 * r.train_acc, 1),
               "%  ", r.eval_split, " ", r.eval ? fixed(100 * r.eval->accuracy, 1) + "%" : std::string("-"), "  lr ", general(r.lr),
               "  ", seconds_text(r), "  ", fixed(r.img_per_s, 0), " img/s  tape ",
               format_bytes(r.tape.stored_bytes), " (dense ", format_bytes(r.tape.dense_bytes), ", ", fixed(ratio, 1),
               "x)  rss ", format_bytes(r.rss_bytes)) +
           (r.skipped ? fmt("  skipped ", r.skipped, " non-finite steps") : std::string());
}

}  // namespace razor::train
