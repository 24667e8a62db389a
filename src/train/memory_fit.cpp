#include "train/memory_fit.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "plan/layout.hpp"
#include "plan/memory.hpp"
#include "plan/partition.hpp"
#include "plan/units.hpp"
#include "plan/schedule_report.hpp"
#include "train/resident_memory.hpp"

namespace trident {

namespace {

std::int64_t planned_bytes_of(const Deck& deck, int world_rank) {
  const std::vector<StageLayers> stages = partition_layers(deck.model, deck.parallel, deck_schedule(deck).chunks);
  return rank_memory(deck, stages, rank_to_coords(world_rank, deck.parallel).pp).total_bytes();
}

}  // namespace

void check_memory_fits(const Deck& deck, MPI_Comm world) {
  int world_rank = 0, node_ranks = 0;
  MPI_Comm_rank(world, &world_rank);
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_ranks);
  const std::int64_t mine = planned_bytes_of(deck, world_rank);
  std::int64_t on_node = mine, largest = mine;
  MPI_Allreduce(&mine, &on_node, 1, MPI_INT64_T, MPI_SUM, node);
  MPI_Allreduce(&mine, &largest, 1, MPI_INT64_T, MPI_MAX, node);
  MPI_Comm_free(&node);
  const std::int64_t available = node_memory_bytes();
  if (on_node <= available) return;
  throw InputError(deck.path + ": the plan needs " + human_bytes(static_cast<double>(on_node)) + " on this node (" +
                   std::to_string(node_ranks) + " rank(s), the largest " + human_bytes(static_cast<double>(largest)) +
                   ": weights, gradients, AdamW moments, activations, workspace), but the node has " +
                   human_bytes(static_cast<double>(available)) +
                   " of memory; spread the model over more ranks or nodes (parallel.tp, parallel.pp), recompute "
                   "(schedule.recompute, parallel.sequence_parallel) or lower schedule.micro_batch_size; "
                   "`trident plan DECK` shows the memory per rank");
}

}  // namespace trident
