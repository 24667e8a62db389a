// Which layers each pipeline stage holds (DESIGN.md "Parallel semantics", PP).
#pragma once

#include <vector>

#include "deck/config.hpp"

namespace trident {

struct StageLayers {
  int first_layer = 0;
  int num_layers = 0;

  int end_layer() const { return first_layer + num_layers; }  // one past the last layer
  bool operator==(const StageLayers&) const = default;
};

// One entry per stage, consecutive and covering every layer once.
// Explicit parallel.stage_layers (layer counts per stage) is taken as given. Otherwise the split is
// uniform: every stage gets layers / pp, and the first layers % pp stages one more, because the last
// stage already carries ln_f, the head and the loss (the head alone costs about as much compute as
// V / (12 C) layers: five layers for GPT-2 124M).
// Throws InputError naming parallel.pp or parallel.stage_layers when no valid split exists.
std::vector<StageLayers> partition_layers(const ModelConfig& model, const ParallelConfig& parallel);

}  // namespace trident
