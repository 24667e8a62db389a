// How long one training step of a deck takes on a described machine (`trident plan --machine`,
// DESIGN.md "Machine files and step prediction"). Pure: no MPI, nothing run.
//
// Each action's time is built from the model's shape, one TP rank's share of it:
//   matrix products   FLOPs / (the machine's peak at train.precision × its efficiency for a product
//                     of that size); the weight products of a layer (qkv, attention output, the
//                     MLP's), the attention core (batched T × T × head products, halved by the causal
//                     mask with the tiled kernel), the head's logits. Backward: the input-gradient
//                     products (I) and the weight-gradient products (W), each as many FLOPs as the
//                     forward's; the attention core's backward twice its forward, all in I.
//   element-wise      bytes / memory bandwidth: ten passes over the residual stream per layer
//                     (norms, residual adds), the MLP activation's, the explicit kernel's softmax over
//                     the T × T probabilities, the head's softmax cross-entropy over fp32 logits;
//                     backward twice the forward's. Elements are 2 bytes under train.precision =
//                     "bf16" (16-bit mixed precision), 4 otherwise.
//   TP collectives    ring all-reduces (sequence parallelism: all-gathers + reduce-scatters of the same
//                     bytes) of the activations, 2 per layer in F and 2 in I (and 1 in W under sequence
//                     parallelism), on the intra-node link when every TP group sits in one node,
//                     the inter-node link otherwise.
//   context parallel  a rank computes seq_len / cp rows of each sequence, its attention core a
//                     cp-th of the causal square; the ring's cp − 1 hops of k | v per layer (this TP
//                     rank's kv heads) each overlap a cp-th of the core and show where they outlast
//                     it; backward's hops of the keys' gradient sums, one step behind the keys,
//                     overlap the next step but the last (model/ring_attention.hpp); on the link the
//                     cp groups use.
//   mixture           ([model.moe]) the router's product and per expert the pair over its share of
//                     the rows' top_k assignments (balanced routing), whole on every TP rank (one TP
//                     all-reduce per layer, attention's); with parallel.ep the rows' all-to-all out
//                     and back in F and their gradients' in I ((ep − 1) / ep of the fp32 rows, on
//                     the replicas' link).
//   recomputation     "full": I runs the chunk's whole forward again, its collectives included;
//                     "selective": I recomputes the attention core.
// The schedule the deck runs (auto's choice included) is simulated with these costs and, between
// ranks, one message's time (latency + bytes / bandwidth on the link the pipeline crosses). After
// the pipeline: the tied embedding's gradient sum between the first and the last stage, the data-
// parallel gradient reduction (a ring over the dp × cp ranks of the rank's fp32 gradients, started
// during the last micro-batch's backward as trident does, so only what outlasts that backward
// shows; ZeRO-1's all-gather of the updated weights after the optimizer), and AdamW (28 bytes per
// parameter through memory). An [emulate] deck's actions take the times it gives (the machine still
// carries its messages). Not counted: kernel launches, the data loader, checkpoints, logging.
#pragma once

#include <cstdint>
#include <vector>

#include "deck/config.hpp"
#include "predict/machine.hpp"
#include "schedule/schedule.hpp"

namespace trident {

struct StepPrediction {
  Schedule schedule;        // what the deck runs (auto's choice included)
  ActionCosts costs;        // seconds per action of each virtual stage, and one message's time
  double pipeline_s = 0.0;  // the simulated schedule
  double bubble = 0.0;      // of the simulated schedule
  double tp_comm_s = 0.0;   // TP collectives inside the busiest rank's actions over the step
  double cp_comm_s = 0.0;   // the CP ring's hops that attention does not hide, on the busiest rank
  double ep_comm_s = 0.0;   // a mixture's expert-parallel all-to-alls (balanced routing), on the busiest rank
  double embedding_sync_s = 0.0;
  double dp_exposed_s = 0.0;  // the data-parallel reduction (and ZeRO-1's all-gather) not hidden
  double optimizer_s = 0.0;
  double step_time_s = 0.0;  // pipeline + embedding sync + the slowest rank's exposed DP and optimizer
  double tokens_per_s = 0.0;
  double flops_per_step = 0.0;                      // plan/model_size.hpp's model FLOPs
  double flops_per_device = 0.0;                    // FLOP/s: flops_per_step / step_time_s / devices
  double mfu = 0.0;                                 // flops_per_device / the peak at the deck's precision
  std::vector<std::int64_t> memory_per_rank_bytes;  // per pipeline rank (plan/memory.hpp)
  bool fits = false;                                // every rank's memory within the device's
};

// Throws InputError when the deck's precision has no peak in the machine file (or as
// deck_schedule does).
StepPrediction predict_step(const Deck& deck, const Machine& machine);

}  // namespace trident
