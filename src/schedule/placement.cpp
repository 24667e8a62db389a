#include "schedule/placement.hpp"

#include <stdexcept>
#include <string>

namespace trident {

int placed_virtual_stage(ChunkPlacement placement, int pp, int chunks, int rank, int chunk) {
  if (placement == ChunkPlacement::v_shape && chunks != 2)
    throw std::invalid_argument("placed_virtual_stage: a V holds 2 chunks per rank, not " + std::to_string(chunks));
  if (placement == ChunkPlacement::v_shape && chunk == 1) return 2 * pp - 1 - rank;
  return chunk * pp + rank;
}

int head_rank(ChunkPlacement placement, int pp) { return placement == ChunkPlacement::v_shape ? 0 : pp - 1; }

ChunkPosition chunk_position(ChunkPlacement placement, int pp, int virtual_stage) {
  if (placement == ChunkPlacement::v_shape && virtual_stage >= pp) return {2 * pp - 1 - virtual_stage, 1};
  return {virtual_stage % pp, virtual_stage / pp};
}

}  // namespace trident
