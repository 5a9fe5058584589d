// train/tape_meter.h -- the tape's stored bytes of one training step, as the loop and razor bench report them.
//
// The only place the training layer reads the tape's accounting (core/saved.h): a step starts a measurement, and its
// peak (stored bytes and their dense-equivalent) is read when it ends. docs: docs/back-razor.md.
#pragma once

#include "core/tape.h"

namespace razor::train {

class TapeMeter {
public:
    void begin_step();              // the peak restarts from what the tape holds now
    TapeTotals end_step() const;    // the peak since begin_step()
};

// The one with more stored bytes (the first on a tie).
inline TapeTotals larger(const TapeTotals& a, const TapeTotals& b) { return b.stored_bytes > a.stored_bytes ? b : a; }

}  // namespace razor::train
