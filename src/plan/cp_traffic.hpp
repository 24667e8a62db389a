// Context parallelism's ring (model/ring_attention.hpp) in one training step on one CP rank. Per
// layer and micro-batch, forward sends the k | v chunks in hand on cp − 1 times; backward sends them
// on cp − 1 times more and their gradients cp times (a whole turn, back to their owner); every
// message is B · (T / cp) rows of this TP rank's kv heads, k and v, in fp32 as the ring keeps
// them. Full recomputation runs every forward twice. The timeline's RING_CP events record the same
// bytes (sent), one event per pipeline action.
#pragma once

#include <cstdint>
#include <vector>

#include "deck/config.hpp"
#include "plan/partition.hpp"

namespace trident {

struct CpTraffic {
  std::int64_t hops = 0;   // messages sent
  std::int64_t bytes = 0;  // their bytes
};

// One step of pipeline rank `rank` (every TP and CP rank of it alike): its chunks stages[rank],
// stages[rank + pp], ... over all of the deck's micro-batches. Zero without context parallelism.
CpTraffic cp_traffic_per_step(const Deck& deck, const std::vector<StageLayers>& stages, int rank);

}  // namespace trident
