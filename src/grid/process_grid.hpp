// This rank's place in the TP × PP × DP grid and one communication group per axis, named as in
// Megatron-Core's parallel_state. Built once at start-up from the pure layout in plan/layout.hpp.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "comm/comm.hpp"
#include "comm/timed_comm.hpp"
#include "deck/config.hpp"
#include "plan/layout.hpp"

namespace trident {

// A *_group is a communicator, a *_rank this rank's coordinate on that axis (its rank in the
// group), a *_size the group's size (the deck's parallel.tp, pp, dp).
struct ProcessGrid {
  ParallelConfig config;
  int world_rank = 0;
  int world_size = 1;
  GridCoords coords;

  // Ranks sharing this rank's layers, each holding a slice of them; timed, since the model's
  // blocking TP collectives are the step's tp_comm_s.
  std::unique_ptr<TimedComm> tp_group;
  std::unique_ptr<Comm> pp_group;  // the pipeline: one rank per stage
  std::unique_ptr<Comm> dp_group;  // replicas of this rank's shard
  // First and last pipeline stage with this rank's tp and dp coordinates: they hold the two copies
  // of the tied wte whose gradients are summed. A group of one when pp = 1 or on middle stages.
  std::unique_ptr<Comm> embedding_group;

  int tp_rank() const { return coords.tp; }
  int pp_rank() const { return coords.pp; }
  int dp_rank() const { return coords.dp; }
  int tp_size() const { return config.tp; }
  int pp_size() const { return config.pp; }
  int dp_size() const { return config.dp; }
  bool first_stage() const { return pp_rank() == 0; }
  bool last_stage() const { return pp_rank() == pp_size() - 1; }
};

// Collective over `world`, whose size must be config.world_size() (checked by the caller).
ProcessGrid make_process_grid(MPI_Comm world, const ParallelConfig& config);

// Every rank's host and coordinates, one line per rank; collective, the text is complete on rank 0.
std::string describe_rank_layout(MPI_Comm world, const ProcessGrid& grid);

}  // namespace trident
