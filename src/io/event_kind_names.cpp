// event_kind_name (common/timeline_event.hpp): the strings stored in the timeline's
// /events/kind column, which the Python post-processing tools match on (DESIGN.md "Timeline").
#include "common/timeline_event.hpp"

namespace trident {

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::forward: return "F";
    case EventKind::backward: return "B";
    case EventKind::input_grad: return "I";
    case EventKind::weight_grad: return "W";
    case EventKind::send: return "SEND";
    case EventKind::recv: return "RECV";
    case EventKind::allreduce_tp: return "ALLREDUCE_TP";
    case EventKind::allgather_tp:
      return "ALLGATHER_TP";
    case EventKind::reduce_scatter_tp:
      return "REDUCE_SCATTER_TP";
    case EventKind::ring_cp: return "RING_CP";
    case EventKind::alltoall_ep: return "ALLTOALL_EP";
    case EventKind::allreduce_dp: return "ALLREDUCE_DP";
    case EventKind::allreduce_embedding: return "ALLREDUCE_EMB";
    case EventKind::optimizer: return "OPTIMIZER";
    case EventKind::checkpoint_write: return "CKPT_WRITE";
    case EventKind::checkpoint_blocked: return "CKPT_BLOCKED";
  }
  // Only reachable through a cast of an out-of-range integer; keep the file writable anyway.
  return "UNKNOWN";
}

}  // namespace trident
