// Which pieces of the model a pipeline rank holds: for each of its chunks, the layers of the
// virtual stage the schedule maps it to, with the embedding on virtual stage 0 and the head on the
// last one.
#pragma once

#include <vector>

#include "model/model_chunk.hpp"
#include "plan/partition.hpp"
#include "schedule/schedule.hpp"

namespace trident {

// virtual_stage_layers: partition_layers(..., schedule.chunks), one entry per virtual stage.
std::vector<ModelChunk> stage_chunks(const Schedule& schedule, const std::vector<StageLayers>& virtual_stage_layers,
                                     int pipeline_rank);

}  // namespace trident
