// train/progress.h -- the progress line on stderr: bar, percent, img/s, ETA, running loss/accuracy, tape memory.
//
// On a terminal the line redraws in place (at most 10 times a second); when stderr is a file or a CI log it prints a
// plain line every 10 % instead, so logs stay readable. The line fits the terminal's width (TIOCGWINSZ on stderr,
// else $COLUMNS, else 80 columns; never planned narrower than 80): the tail (`extra`) goes first, then the bar
// shrinks to 10 cells, then the line is cut. docs: docs/cli.md "Output".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace razor::train {

class Progress {
public:
    // first_step: the steps of the epoch done before this line starts (a run resumed mid-epoch); img/s and the ETA
    // count only the steps after it.
    Progress(std::string label, int64_t total_steps, int64_t images_per_step, int64_t first_step = 0);
    // `extra` is appended verbatim (e.g. "tape 12.1 MiB (dense 48.4 MiB, 4.0x)").
    void update(int64_t step, double loss, double accuracy, const std::string& extra = "");
    void finish();
    double seconds() const;
    double images_per_second() const;

private:
    std::string label_;
    int64_t total_, per_step_, first_, step_;
    std::chrono::steady_clock::time_point start_, last_draw_;
    bool tty_;
    int columns_;
    int last_decile_ = -1;
};

// What one progress line shows.
struct ProgressState {
    std::string label;
    int64_t step = 0, total = 0;
    double loss = 0, accuracy = 0, images_per_second = 0, eta_seconds = 0;
    std::string extra;
};
// The line, at most `columns` characters (no newline, no escape codes).
std::string progress_text(const ProgressState& s, int columns);
// The width the line may use: stderr's terminal width, else $COLUMNS, else 80; at least 80 columns.
int progress_columns();

}  // namespace razor::train
