// This rank's place in the TP × CP × PP × DP grid and one communication group per axis, named as in
// Megatron-Core's parallel_state. Built once at start-up from the pure layout in plan/layout.hpp.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/timed_comm.hpp"
#include "deck/config.hpp"
#include "plan/layout.hpp"
#include "plan/partition.hpp"

namespace trident {

// A *_group is a communicator, a *_rank this rank's coordinate on that axis (its rank in the
// group), a *_size the group's size (the deck's parallel.tp, cp, pp, dp).
struct ProcessGrid {
  ParallelConfig config;
  int world_rank = 0;
  int world_size = 1;
  GridCoords coords;
  std::vector<std::string> hosts;  // every rank's host (MPI's processor name), by world rank

  // Ranks sharing this rank's layers, each holding a slice of them; timed, since the model's
  // blocking TP collectives are the step's tp_comm_s.
  std::unique_ptr<TimedComm> tp_group;
  // The ranks holding the other chunks of this rank's sequences, around which ring attention's keys
  // and values travel; timed, as tp_group: the step's cp_comm_s.
  std::unique_ptr<TimedComm> cp_group;
  std::unique_ptr<Comm> pp_group;  // the pipeline: one rank per stage
  // Replicas of this rank's shard of the weights: its dp × cp ranks (Megatron's data-parallel group
  // with context parallelism), each computing the gradient of its own tokens. Gradients, the loss
  // and ZeRO-1's optimizer shards are reduced over it; the data is read by dp coordinate.
  std::unique_ptr<Comm> dp_cp_group;
  // The pipeline ranks holding the embedding (pipeline rank 0) and the head (plan/partition.hpp's
  // head_rank), with this rank's tp and dp coordinates: the two copies of the tied wte whose
  // gradients are summed. A group of one where one rank holds both (pp = 1, a V) and elsewhere.
  std::unique_ptr<Comm> embedding_group;
  // [model.moe] with parallel.ep > 1 (else a group of one, and null): the ep consecutive data-parallel
  // ranks among which this rank's share of the experts is split (Megatron's expert-model-parallel
  // group), over which the tokens' all-to-all travels (timed: the step's ep_comm_s); and the dp / ep
  // ranks holding the same experts, over which those experts' gradients are reduced (the
  // expert-data-parallel group).
  std::unique_ptr<TimedComm> ep_group;
  std::unique_ptr<Comm> expert_dp_group;
  int head_pp_rank = 0;  // the pipeline rank of the head

  int tp_rank() const { return coords.tp; }
  int cp_rank() const { return coords.cp; }
  int pp_rank() const { return coords.pp; }
  int dp_rank() const { return coords.dp; }
  int tp_size() const { return config.tp; }
  int cp_size() const { return config.cp; }
  int pp_size() const { return config.pp; }
  int dp_size() const { return config.dp; }
  int ep_rank() const { return coords.dp % config.ep; }
  int ep_size() const { return config.ep; }
  bool first_replica() const { return coords.dp == 0 && coords.cp == 0; }  // writes the shard's checkpoint
  bool first_stage() const { return pp_rank() == 0; }
  bool holds_head() const { return pp_rank() == head_pp_rank; }
};

// parallel.p2p as this build runs it: "auto" is nccl on the GPU build (mpi, tagged, with
// parallel.share_device, where nccl is an InputError) and mpi on the CPU build, where nccl is an
// InputError.
P2pMatching resolve_p2p(P2pMatching p2p, bool share_device);

// Collective over `world`, whose size must be config.world_size() (checked by the caller).
// `placement`: where the schedule puts the chunks (which pipeline rank holds the head). The grid's
// config holds parallel.p2p resolved.
ProcessGrid make_process_grid(MPI_Comm world, const ParallelConfig& requested,
                              ChunkPlacement placement = ChunkPlacement::interleaved);

// Every rank's host and coordinates, one line per rank.
std::string describe_rank_layout(const ProcessGrid& grid);

// "pipeline rank 1 (world rank 5 on node12)": the member `pipeline_rank` of this rank's pipeline
// group, for messages about a peer that does not answer.
std::string describe_pipeline_peer(const ProcessGrid& grid, int pipeline_rank);

}  // namespace trident
