// Moving layers between the stages from measured costs (schedule.replan): the measured time of
// each virtual stage, per action kind, read as a fixed cost per action (launches, copies,
// messages: what dominates a tiny model), plus its layers times one layer's time, plus the head's
// (ln_f, the head and the loss) on the last virtual stage. The embedding, a lookup next to nothing
// (plan/partition.hpp ForwardFlops), folds into the first stage's share. A stage on a slower rank
// (a straggler) has all of that times its slowness. Pure.
#pragma once

#include <vector>

#include "plan/partition.hpp"
#include "schedule/schedule.hpp"

namespace trident {

struct LayerCosts {
  ActionCosts::Stage fixed;  // every virtual stage's F, B, I, W without its layers
  ActionCosts::Stage layer;  // one layer's
  ActionCosts::Stage head;   // what the last virtual stage adds (never negative)
};

// The fit of `measured` (one entry per virtual stage of `partition`, two or more). The virtual
// stages but the last give the fixed and the per-layer time: a least-squares line through their
// (layers, time) where they hold at least two different layer counts and it rises, otherwise no
// fixed time and their mean time per layer. The head's time is what the last stage's fixed time
// and layers leave of its time.
LayerCosts fit_layer_costs(const std::vector<StageLayers>& partition, const ActionCosts& measured);

// The split of `layers` into `pieces` that minimises the largest F + B of a virtual stage under
// `fit` (plan/partition.hpp balanced_layer_counts), each stage's times `slowness[i]` (empty: 1 for all).
std::vector<StageLayers> measured_balanced_partition(const LayerCosts& fit, int layers, int pieces,
                                                     const std::vector<double>& slowness = {});

// What each virtual stage of `partition` would cost under `fit`, times its `slowness` (empty: 1).
ActionCosts predicted_action_costs(const LayerCosts& fit, const std::vector<StageLayers>& partition,
                                   double p2p_latency, const std::vector<double>& slowness = {});

}  // namespace trident
