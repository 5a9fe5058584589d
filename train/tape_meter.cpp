// train/tape_meter.cpp -- see tape_meter.h.
#include "train/tape_meter.h"

namespace razor::train {

void TapeMeter::begin_step() { TapeAccounting::instance().reset_peak(); }
TapeTotals TapeMeter::end_step() const { return TapeAccounting::instance().peak(); }

}  // namespace razor::train
