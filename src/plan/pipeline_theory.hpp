// Closed-form pipeline numbers used before any schedule runs (DESIGN.md "Schedules are data").
#pragma once

#include "deck/config.hpp"

namespace trident {

// Micro-batches whose activations pipeline rank `stage` (0-based, of `stages`) holds at its peak,
// counted in micro-batches of a whole rank (with v chunks per rank, chunks in flight / v): each
// kind's peak_in_flight (schedule/registry.cpp: gpipe m; 1f1b min(p - s, m); zb-h1 min(p, m);
// interleaved-1f1b Megatron's warm-up plus one, min(2 (p - s - 1) + (v - 1) p + 1, m v) chunks / v;
// zb-v and v-half the bound their generator keeps; dualpipev min(2 p + 1, 2 m) chunks / 2; one
// stage: 1 but for gpipe and dualpipev). auto: not known without simulating, so the bound auto
// respects, min(auto_memory_limit or p, m) (plan/schedule_report.hpp shows the choice). The
// simulator counts the same peaks from the generated lists.
double in_flight_microbatches(const ScheduleConfig& schedule, int stage, int stages);

// Idle fraction of gpipe and 1f1b with p stages and m micro-batches: (p - 1) / (m + p - 1); with
// v chunks per rank, Megatron's interleaved-1f1b: (p - 1) / (v m + p - 1) (each of the p - 1 fill
// and drain steps lasts one chunk, 1/v of a stage). Equal stage costs and free messages assumed.
double theoretical_bubble(int stages, int microbatches, int chunks = 1);

}  // namespace trident
