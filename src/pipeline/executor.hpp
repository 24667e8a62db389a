// Runs one pipeline rank's lowered action list (schedule/messages.hpp: RECV, COMPUTE, SEND) for one
// training step (DESIGN.md "Schedules are data").
//
// Messages are non-blocking: the receives of the next few RECV ops are posted ahead of time, and
// sends complete in the background while the rank computes. TP ranks of a stage all run the same list
// and each talks to its peer (same tp and dp coordinates) in the neighbouring stage: that is the
// `pipeline` group.
//
// Watchdog: a wait for a message longer than timeout_s reports the action, the peer and the tag
// it waits for and calls on_timeout (the trainer aborts the whole job), so a broken schedule never
// hangs silently.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "common/timeline_event.hpp"
#include "kernels/device.hpp"
#include "pipeline/stage_compute.hpp"
#include "schedule/messages.hpp"
#include "schedule/schedule.hpp"

namespace trident {

struct PipelineStepResult {
  std::vector<TimelineEvent> events;  // this rank's actions and message waits, on `clock`
};

class PipelineExecutor {
 public:
  struct Options {
    std::size_t message_floats = 0;  // floats of one activation or gradient message (B·T·C)
    double timeout_s = 300.0;
    std::function<double()> clock;   // seconds on the run's common clock
    std::function<void(const std::string&)> on_timeout;  // must not return (aborts the job)
    // Optional: the events of the collectives the compute ran since the last call (tensor
    // parallelism's); each action's are recorded after it with its micro-batch and chunk, and
    // those before the step's first action are dropped.
    std::function<std::vector<TimelineEvent>()> take_collective_events;
    // Optional: how the timeout message names a pipeline rank (e.g. with its host); by default
    // "pipeline rank N".
    std::function<std::string(int)> describe_peer;
    // How `pipeline` matches messages (resolved, not automatic). ordered and nccl: a message
    // travels with its direction as tag, and the Comm pairs messages of one peer and tag in the
    // order they were posted (MPI's non-overtaking rule; the NCCL pipeline Comm's channels): NCCL's
    // matching, one FIFO per pair of ranks and direction (the schedule must pass
    // find_message_order_problem).
    P2pMatching p2p = P2pMatching::tagged;
    // Optional: the time of this point of the device's work, for the actions' events, on `clock`'s
    // axis, without the host waiting for the device (kernels/device_clock.hpp); default: `clock`.
    std::function<double()> mark;
  };

  // `pipeline`: this rank's pipeline group (rank i = pipeline rank i of `schedule`), which must
  // outlive the executor. The schedule must be valid (find_schedule_problem empty), and with
  // ordered messages pair them in posting order (find_message_order_problem empty):
  // std::logic_error otherwise.
  PipelineExecutor(const Schedule& schedule, Comm& pipeline, Options options);

  PipelineStepResult run_step(StageCompute& compute);

 private:
  std::vector<StepOp> ops_;  // this rank's lowered list
  int chunks_;
  // Per chunk: the index in ops_ of the compute op after which its weight gradients are final.
  std::vector<std::size_t> last_weight_op_;
  Comm& pipeline_;
  Options options_;
  std::vector<FloatBuffer> free_buffers_;  // message buffers, reused from step to step
};

}  // namespace trident
