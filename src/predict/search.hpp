// `trident plan DECK --machine FILE --search`: every grid of the deck's device count that the
// machine can hold, fastest predicted step first. Pure.
//
// The global batch (micro_batch_size × microbatches × dp sequences) and the model stay the deck's;
// what varies: tp (dividing the heads, at most one node's devices), cp (with the tiled attention
// kernel, whole chunks: seq_len a multiple of 2 · cp), pp (at most one layer per stage),
// dp = devices / (tp · cp · pp), the micro-batch size (1, 2, 4, 8 dividing the sequences of a
// replica), the schedule (1f1b, zb-h1; with pp > 1 also interleaved-1f1b, zb-v and dualpipev with
// two chunks per rank, where they can run), and recomputation (none, full, and selective with the
// explicit attention kernel, whose probabilities it drops). The
// deck's precision, attention kernel, sequence parallelism and ZeRO stage are kept.
#pragma once

#include <vector>

#include "deck/config.hpp"
#include "predict/machine.hpp"
#include "predict/step_model.hpp"

namespace trident {

struct GridCandidate {
  Deck deck;  // the deck with this grid, micro-batching, schedule and recomputation
  StepPrediction prediction;
};

// Candidates whose every rank fits the device's memory, fastest first (at most `limit`), how
// many grids were predicted in all, and the deck's own grid to compare them with.
struct GridSearch {
  std::vector<GridCandidate> fastest;
  int predicted = 0;
  int over_memory = 0;
  GridCandidate deck_grid;   // the deck as given (its schedule, `auto` included), predicted alike
  int faster_than_deck = 0;  // candidates that fit and beat it, not only those shown
};
GridSearch search_grids(const Deck& deck, const Machine& machine, int devices, int limit);

}  // namespace trident
