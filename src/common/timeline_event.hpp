// One interval of one rank's time, as the timeline's /events table records it (DESIGN.md
// "Timeline"): a pipeline action, a wait for a message or a collective, the optimizer.
// Produced by the executor and the trainer, written by io/timeline_writer.
#pragma once

#include <cstdint>

namespace trident {

enum class EventKind : std::uint8_t {
  forward,              // F
  backward,             // B
  input_grad,           // I
  weight_grad,          // W
  send,                 // SEND: waiting for a pipeline send to complete
  recv,                 // RECV: waiting for a pipeline message to arrive
  allreduce_tp,         // tensor-parallel collectives of one action, one event per kind (merged:
  allgather_tp,         // from the first call, as long as the action was blocked in them; bytes:
  reduce_scatter_tp,    // their buffers' total)
  ring_cp,              // context parallelism's ring hops of one action, merged as the TP kinds (bytes: sent)
  alltoall_ep,          // expert parallelism's all-to-alls of one action, merged likewise (bytes: sent)
  allreduce_dp,         // data-parallel gradient reduction not hidden behind backward
  allreduce_embedding,  // tied wte gradients summed over the first and last stage
  optimizer,
  checkpoint_write,    // CKPT_WRITE: the rank's background thread writing its part of a checkpoint
                       // (checkpoint.async; bytes: its data): the one kind that overlaps the rank's others
  checkpoint_blocked,  // CKPT_BLOCKED: training stopped for a checkpoint: the whole save when synchronous
                       // (bytes: the rank's data), the host copy and the wait and commit of a background one
};

// "F", "B", "I", "W", "SEND", "RECV", "ALLREDUCE_TP", "ALLGATHER_TP", "REDUCE_SCATTER_TP", "RING_CP",
// "ALLTOALL_EP", "ALLREDUCE_DP", "ALLREDUCE_EMB", "OPTIMIZER", "CKPT_WRITE", "CKPT_BLOCKED".
const char* event_kind_name(EventKind kind);

// True for F, B, I and W: the busy time the bubble is measured against.
inline bool is_compute(EventKind kind) { return kind <= EventKind::weight_grad; }

struct TimelineEvent {
  EventKind kind = EventKind::forward;
  std::int32_t microbatch = -1;  // -1 when not about one micro-batch
  std::int32_t chunk = -1;
  double t_start = 0.0;  // seconds on the run's common clock
  double t_end = 0.0;
  std::int64_t bytes = 0;  // bytes moved (communication events), else 0
};

}  // namespace trident
