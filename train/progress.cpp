// train/progress.cpp -- see progress.h.
#include "train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace razor::train {

int progress_columns() {
    int columns = 0;
    winsize ws{};
    if (::isatty(STDERR_FILENO) && ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0) columns = ws.ws_col;
    if (columns <= 0)
        if (const char* env = std::getenv("COLUMNS")) columns = std::atoi(env);
    return std::max(columns, 80);
}

std::string progress_text(const ProgressState& s, int columns) {
    const double frac = s.total ? static_cast<double>(s.step) / s.total : 1.0;
    char head[160], tail[160];
    std::snprintf(head, sizeof head, " %3.0f%% %lld/%lld", 100 * frac, static_cast<long long>(s.step),
                  static_cast<long long>(s.total));
    std::snprintf(tail, sizeof tail, "  loss %.4f  acc %5.1f%%  %.0f img/s  ETA %.0fs", s.loss, 100 * s.accuracy,
                  s.images_per_second, s.eta_seconds);
    // label [bar] head tail  extra: the bar takes what is left, 10 to 24 cells; extra only if it fits whole.
    const int fixed = static_cast<int>(s.label.size() + 3 + std::char_traits<char>::length(head) +
                                       std::char_traits<char>::length(tail));
    const int room = columns - 1 - fixed;   // one column spare: a line exactly as wide as the terminal wraps
    const bool with_extra = !s.extra.empty() && room - 2 - static_cast<int>(s.extra.size()) >= 10;
    const int bar_width =
        std::clamp(with_extra ? room - 2 - static_cast<int>(s.extra.size()) : room, 10, 24);
    std::string bar(bar_width, ' ');
    const int filled = static_cast<int>(frac * bar_width);
    for (int i = 0; i < bar_width; ++i) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    std::string line = s.label + " [" + bar + "]" + head + tail + (with_extra ? "  " + s.extra : std::string());
    if (static_cast<int>(line.size()) > columns - 1) line.resize(std::max(columns - 1, 0));
    return line;
}

Progress::Progress(std::string label, int64_t total_steps, int64_t images_per_step, int64_t first_step)
    : label_(std::move(label)), total_(total_steps), per_step_(images_per_step), first_(first_step), step_(first_step),
      start_(std::chrono::steady_clock::now()), last_draw_(start_), tty_(::isatty(STDERR_FILENO) != 0),
      columns_(progress_columns()) {}

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
    const double eta = step > first_ ? seconds() * static_cast<double>(total_ - step) / static_cast<double>(step - first_) : 0.0;
    const std::string line = progress_text({label_, step, total_, loss, accuracy, images_per_second(), eta, extra},
                                           columns_);
    std::fprintf(stderr, "%s%s%s", tty_ ? "\r\033[K" : "", line.c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
}

void Progress::finish() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
}

}  // namespace razor::train
