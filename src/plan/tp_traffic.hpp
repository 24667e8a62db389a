// Tensor-parallel communication of one training step on one TP rank: which collectives its
// chunks' forward and backward passes run, and how many bytes. Each collective is counted by the
// size of its whole buffer, as the timeline's ALLREDUCE_TP, ALLGATHER_TP and REDUCE_SCATTER_TP
// events record it (an all-reduce of N bytes, an all-gather into N bytes, a reduce-scatter of N
// bytes); wire_bytes() is what a ring sends per rank: 2(tp-1)/tp N for an all-reduce, (tp-1)/tp N
// for the other two.
//
// Per layer and micro-batch, N = B*T*C*4 bytes (T: the rank's seq_len / cp positions) (B*T*C*2 for the norm outputs' all-gathers under
// train.precision = "bf16", which keeps them in bf16). Without sequence parallelism: forward 2
// all-reduces (the row-parallel outputs), backward 2 (the column-parallel input gradients).
// With it (Megatron's sequence parallelism): forward 2 all-gathers (the norm outputs) and 2
// reduce-scatters (the row-parallel outputs); backward 2 all-gathers (the output gradients), 2
// reduce-scatters (the input gradients) and 2 all-gathers more (the norm outputs again, for the
// column-parallel weight gradients), and one small all-reduce of the norms' weight gradients.
// The embedding adds one all-reduce (a reduce-scatter and, in backward, an all-gather with
// sequence parallelism), the head the loss's all-gather of 3 statistics per row and per rank and
// one all-reduce of its input gradient (an all-gather of its input, a reduce-scatter, an
// all-gather again for its weight gradient and the final norm's gradient sum with sequence
// parallelism). Full recomputation runs every forward twice; selective recomputation moves
// nothing more.
#pragma once

#include <cstdint>
#include <vector>

#include "deck/config.hpp"
#include "plan/partition.hpp"

namespace trident {

struct PlannedCollectives {
  std::int64_t count = 0;
  std::int64_t bytes = 0;  // the buffers' sizes, summed
};

struct TpTraffic {
  PlannedCollectives all_reduce, all_gather, reduce_scatter;
  int tp = 1;
  // Bytes a ring implementation sends from each rank.
  double wire_bytes() const;
};

// One step of pipeline rank `rank` (every TP rank of it alike): its chunks stages[rank],
// stages[rank + pp], ... over all of the deck's micro-batches. Zero without tensor parallelism.
TpTraffic tp_traffic_per_step(const Deck& deck, const std::vector<StageLayers>& stages, int rank);

}  // namespace trident
