// V-shape schedules: zb-v (zero bubble at 1F1B's activation memory) and v-half (a chosen fraction
// of it; half by default). See v_shape.cpp for the rule that orders the actions.
#pragma once

#include "deck/choices.hpp"
#include "schedule/schedule.hpp"

namespace trident {

// `kind` zb_v or v_half for p stages and m micro-batches, two chunks per rank, holding at most
// plan/pipeline_theory.hpp's v_shape_activation_cap chunk activations per rank.
Schedule make_v_shape(ScheduleKind kind, int stages, int microbatches, double activation_budget);

// The same, ordered for `costs` (2p virtual stages: F, I, W and the p2p latency) instead of equal
// ones: what re-planning from measured costs generates.
Schedule make_v_shape(ScheduleKind kind, int stages, int microbatches, double activation_budget,
                      const ActionCosts& costs);

}  // namespace trident
