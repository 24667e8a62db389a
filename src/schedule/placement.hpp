// Where each rank's model chunks sit in the model (ChunkPlacement, schedule/registry.hpp, which the
// schedule's kind decides): virtual stage ↔ (pipeline rank, chunk).
#pragma once

#include "schedule/registry.hpp"

namespace trident {

// The virtual stage of chunk `chunk` of pipeline rank `rank` (chunks per rank: `chunks`).
int placed_virtual_stage(ChunkPlacement placement, int pp, int chunks, int rank, int chunk);

// The pipeline rank holding the last virtual stage (the head and the loss): pp − 1, or 0 in a V.
int head_rank(ChunkPlacement placement, int pp);

// The rank and chunk holding virtual stage `virtual_stage`.
struct ChunkPosition {
  int rank = 0;
  int chunk = 0;
};
ChunkPosition chunk_position(ChunkPlacement placement, int pp, int virtual_stage);

}  // namespace trident
