// V-shape schedules: zb-v (zero bubble at 1F1B's activation memory) and v-half (a chosen fraction
// of it; half by default). See v_shape.cpp for the rule that orders the actions.
#pragma once

#include "schedule/schedule.hpp"

namespace trident {

// The most chunk activations (F run, W not yet) a rank of a V-shape schedule holds: zb-v 2p, which
// is 1F1B's peak of p whole stages; v-half schedule.activation_budget (0 < b <= 1) of that, rounded
// up, and at least 2 (one per chunk).
int v_shape_activation_cap(ScheduleKind kind, int stages, double activation_budget);

// `kind` zb_v or v_half for p stages and m micro-batches, two chunks per rank, holding at most
// v_shape_activation_cap chunk activations per rank.
Schedule make_v_shape(ScheduleKind kind, int stages, int microbatches, double activation_budget);

// The same, ordered for `costs` (2p virtual stages: F, I, W and the p2p latency) instead of equal
// ones: what re-planning from measured costs generates.
Schedule make_v_shape(ScheduleKind kind, int stages, int microbatches, double activation_budget,
                      const ActionCosts& costs);

}  // namespace trident
