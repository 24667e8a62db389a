// Expert parallelism's all-to-alls (model/moe_mlp.hpp) in one training step on one rank, under
// balanced routing (each expert takes an equal share of every rank's assignments). Per mixture
// layer and micro-batch, forward sends each other rank of the ep group the counts of its rows for
// that rank's experts (E / ep integers), then the (ep − 1) / ep of its B·T·top_k assigned rows that
// go to other ranks, and the rows it took from them back; backward sends the same rows' gradients
// both ways. Rows are fp32, d_model wide. Full recomputation runs every forward twice. The
// timeline's ALLTOALL_EP events record the bytes sent as the routing fell.
#pragma once

#include <cstdint>
#include <vector>

#include "deck/config.hpp"
#include "plan/partition.hpp"

namespace trident {

struct EpTraffic {
  std::int64_t exchanges = 0;  // all-to-alls
  std::int64_t bytes = 0;      // bytes sent
};

// One step of pipeline rank `rank` (every TP rank of it alike): its chunks stages[rank],
// stages[rank + pp], ... over all of the deck's micro-batches. Zero without expert parallelism.
EpTraffic ep_traffic_per_step(const Deck& deck, const std::vector<StageLayers>& stages, int rank);

}  // namespace trident
