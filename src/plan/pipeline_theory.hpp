// Closed-form pipeline numbers used before any schedule runs (DESIGN.md "Schedules are data").
#pragma once

#include "deck/config.hpp"

namespace trident {

// Micro-batches whose activations stage `stage` (0-based, of `stages`) holds at its peak.
// One stage: 1 (each micro-batch runs forward then backward). gpipe: all m forwards run before the
// first backward. 1f1b: min(p - s, m). Other kinds use the 1f1b number until their generators exist.
int in_flight_microbatches(const ScheduleConfig& schedule, int stage, int stages);

// Idle fraction of gpipe and 1f1b with p stages and m micro-batches: (p - 1) / (m + p - 1).
double theoretical_bubble(int stages, int microbatches);

}  // namespace trident
