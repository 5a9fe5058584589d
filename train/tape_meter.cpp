// train/tape_meter.cpp -- see tape_meter.h.
#include "train/tape_meter.h"

#include "core/tape.h"

namespace razor::train {

void TapeMeter::begin_step() { current_tape().reset_peak(); }
TapeTotals TapeMeter::end_step() const { return current_tape().peak(); }

}  // namespace razor::train
