// train/progress.cpp -- see progress.h.
#include "train/progress.h"

#include <unistd.h>

#include <cstdio>

namespace razor::train {

Progress::Progress(std::string label, int64_t total_steps, int64_t images_per_step, int64_t first_step)
    : label_(std::move(label)), total_(total_steps), per_step_(images_per_step), first_(first_step), step_(first_step),
      start_(std::chrono::steady_clock::now()), last_draw_(start_), tty_(::isatty(STDERR_FILENO) != 0) {}

double Progress::seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double Progress::images_per_second() const {
    const double s = seconds();
    return s > 0 ? static_cast<double>((step_ - first_) * per_step_) / s : 0.0;
}

void Progress::update(int64_t step, double loss, double accuracy, const std::string& extra) {
    step_ = step;
    const auto now = std::chrono::steady_clock::now();
    const int decile = total_ ? static_cast<int>(10 * step / total_) : 10;
    if (tty_) {
        if (step < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    } else if (decile == last_decile_) {
        return;
    }
    last_draw_ = now;
    last_decile_ = decile;
    const double frac = total_ ? static_cast<double>(step) / total_ : 1.0;
    const double eta = step > first_ ? seconds() * static_cast<double>(total_ - step) / static_cast<double>(step - first_) : 0.0;
    constexpr int kWidth = 24;
    char bar[kWidth + 1];
    const int filled = static_cast<int>(frac * kWidth);
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[kWidth] = '\0';
    std::fprintf(stderr, "%s%s [%s] %3.0f%% %lld/%lld  loss %.4f  acc %5.1f%%  %.0f img/s  ETA %.0fs  %s%s",
                 tty_ ? "\r\033[K" : "", label_.c_str(), bar, 100 * frac, static_cast<long long>(step),
                 static_cast<long long>(total_), loss, 100 * accuracy, images_per_second(), eta, extra.c_str(),
                 tty_ ? "" : "\n");
    std::fflush(stderr);
}

void Progress::finish() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
}

}  // namespace razor::train
