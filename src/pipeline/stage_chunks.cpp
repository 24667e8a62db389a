#include "pipeline/stage_chunks.hpp"

#include <stdexcept>
#include <string>

namespace trident {

std::vector<ModelChunk> stage_chunks(const Schedule& schedule, const std::vector<StageLayers>& virtual_stage_layers,
                                     int pipeline_rank) {
  const int last = schedule.virtual_stages() - 1;
  if (static_cast<int>(virtual_stage_layers.size()) != schedule.virtual_stages())
    throw std::invalid_argument("stage_chunks: " + std::to_string(virtual_stage_layers.size()) +
                                " layer ranges for " + std::to_string(schedule.virtual_stages()) + " virtual stages");
  std::vector<ModelChunk> chunks;
  for (int chunk = 0; chunk < schedule.chunks; ++chunk) {
    const int vs = schedule.virtual_stage[pipeline_rank][chunk];
    const StageLayers& layers = virtual_stage_layers[vs];
    chunks.push_back({layers.first_layer, layers.num_layers, vs == 0, vs == last});
  }
  return chunks;
}

}  // namespace trident
