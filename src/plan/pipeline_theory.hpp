// Closed-form pipeline numbers used before any schedule runs (DESIGN.md "Schedules are data").
#pragma once

#include "deck/config.hpp"

namespace trident {

// Micro-batches whose activations pipeline rank `stage` (0-based, of `stages`) holds at its peak,
// counted in micro-batches of a whole rank: with v chunks per rank, chunks in flight / v.
//   gpipe              m: all forwards run before the first backward (one stage too)
//   other kinds but dualpipev, one stage: 1 (each micro-batch runs forward then backward)
//   1f1b, zb-h1        min(p - s, m) (zb-h1 keeps 1F1B's memory; its W only fill bubbles)
//   interleaved-1f1b   Megatron's warm-up plus one: min(2 (p - s - 1) + (v - 1) p + 1, m v) chunks / v
//   zb-v, v-half       the bound their generator keeps: min(v_shape_activation_cap, 2 m) chunks / 2
//   dualpipev          2p chunks after its two forward phases, one more in each F-B pair:
//                      min(2 p + 1, 2 m) chunks / 2
//   auto               not known without simulating; the bound auto respects,
//                      min(auto_memory_limit or p, m) (schedule/schedule_report.hpp shows the choice)
// The schedule module's simulator counts the same peaks from the generated lists.
double in_flight_microbatches(const ScheduleConfig& schedule, int stage, int stages);

// The most chunk activations (F run, W not yet) a rank of a V-shape schedule holds: zb-v 2p, which
// is 1F1B's peak of p whole stages; v-half schedule.activation_budget (0 < b <= 1) of that, rounded
// up, and at least 2 (one per chunk).
int v_shape_activation_cap(ScheduleKind kind, int stages, double activation_budget);

// Idle fraction of gpipe and 1f1b with p stages and m micro-batches: (p - 1) / (m + p - 1); with
// v chunks per rank, Megatron's interleaved-1f1b: (p - 1) / (v m + p - 1) (each of the p - 1 fill
// and drain steps lasts one chunk, 1/v of a stage). Equal stage costs and free messages assumed.
double theoretical_bubble(int stages, int microbatches, int chunks = 1);

}  // namespace trident
