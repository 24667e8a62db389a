#include "pipeline/executor.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "kernels/profile.hpp"
#include "schedule/message_order.hpp"

namespace trident {

namespace {

EventKind event_kind(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return EventKind::forward;
    case ActionKind::backward: return EventKind::backward;
    case ActionKind::input_grad: return EventKind::input_grad;
    case ActionKind::weight_grad: return EventKind::weight_grad;
  }
  return EventKind::forward;
}

// Receives are posted for this many upcoming RECV ops: enough that a message never waits for its
// receive while the rank computes, few enough to bound the buffers.
constexpr std::size_t kReceivesAhead = 4;

// One step of one rank: walks its ops in order. A RECV waits for its message (watchdog on) or takes
// it from the mailbox of hand-offs between this rank's chunks; a COMPUTE runs the action on the
// received input into a fresh output buffer; a SEND starts sending that output.
class StepRun {
 public:
  StepRun(const std::vector<StepOp>& ops, const std::vector<std::size_t>& last_weight_op, int chunks, Comm& pipeline,
          const PipelineExecutor::Options& options, std::vector<FloatBuffer>& free_buffers, StageCompute& compute);
  ~StepRun() { compute_.progress = nullptr; }  // the callback refers to this run
  StepRun(const StepRun&) = delete;
  StepRun& operator=(const StepRun&) = delete;

  PipelineStepResult run();

 private:
  struct Transfer {
    CommRequestPtr request;
    FloatBuffer buffer;
    StepOp op;
  };

  FloatBuffer take_buffer();
  int wire_tag(const StepOp& op) const {
    return matches_in_order(options_.p2p) ? static_cast<int>(op.direction) : op.tag;
  }
  void post_receives_from(std::size_t index);
  void receive(const StepOp& op);
  void compute(std::size_t index);
  void send(const StepOp& op);
  void wait(Transfer& transfer, bool receiving);
  std::string describe(const Transfer& transfer, bool receiving) const;
  double mark() const { return options_.mark ? options_.mark() : options_.clock(); }
  void reap_sends();
  void finish();

  const std::vector<StepOp>& ops_;
  const std::vector<std::size_t>& last_weight_op_;
  int chunks_, rank_;
  Comm& pipeline_;
  const PipelineExecutor::Options& options_;
  std::vector<FloatBuffer>& free_buffers_;
  StageCompute& compute_;
  PipelineStepResult result_;

  std::vector<std::size_t> receive_ops_;  // indices of the RECV ops from another rank
  std::size_t next_receive_ = 0;          // index in receive_ops_ of the next receive to post
  std::map<int, Transfer> receives_;      // posted, by tag
  std::map<int, FloatBuffer> mailbox_;    // hand-offs between two chunks of this rank, by tag
  std::vector<Transfer> sends_;
  FloatBuffer input_, output_;            // of the compute op being run
};

StepRun::StepRun(const std::vector<StepOp>& ops, const std::vector<std::size_t>& last_weight_op, int chunks,
                 Comm& pipeline, const PipelineExecutor::Options& options, std::vector<FloatBuffer>& free_buffers,
                 StageCompute& compute)
    : ops_(ops), last_weight_op_(last_weight_op), chunks_(chunks), rank_(pipeline.rank()), pipeline_(pipeline),
      options_(options), free_buffers_(free_buffers), compute_(compute) {
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (ops_[i].kind == OpKind::recv && ops_[i].peer != rank_) receive_ops_.push_back(i);
  }
  compute_.progress = [this] {
    for (auto& [tag, receive] : receives_) receive.request->test();
    for (Transfer& send : sends_) send.request->test();
  };
}

PipelineStepResult StepRun::run() {
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    post_receives_from(i);
    switch (ops_[i].kind) {
      case OpKind::recv: receive(ops_[i]); break;
      case OpKind::compute: compute(i); break;
      case OpKind::send: send(ops_[i]); break;
    }
    reap_sends();
  }
  finish();
  return std::move(result_);
}

FloatBuffer StepRun::take_buffer() {
  if (free_buffers_.empty())
    return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("pipeline_message")),
                       options_.message_floats);
  FloatBuffer buffer = free_buffers_.back();
  free_buffers_.pop_back();
  return buffer;
}

// Posts the receives of the next kReceivesAhead RECV ops from op `index` on.
void StepRun::post_receives_from(std::size_t index) {
  const std::size_t first_pending =
      std::lower_bound(receive_ops_.begin(), receive_ops_.end(), index) - receive_ops_.begin();
  for (; next_receive_ < std::min(first_pending + kReceivesAhead, receive_ops_.size()); ++next_receive_) {
    const StepOp& op = ops_[receive_ops_[next_receive_]];
    Transfer transfer{nullptr, take_buffer(), op};
    transfer.request = pipeline_.recv_async(transfer.buffer.data(), options_.message_floats, op.peer, wire_tag(op));
    receives_.emplace(op.tag, std::move(transfer));
  }
}

void StepRun::receive(const StepOp& op) {
  if (op.peer == rank_) {
    const auto it = mailbox_.find(op.tag);
    if (it == mailbox_.end())
      throw std::logic_error("pipeline rank " + std::to_string(rank_) + ": " + to_string(op.action, chunks_) +
                             " runs before the action on this rank that produces its input");
    input_ = it->second;
    mailbox_.erase(it);
    return;
  }
  const auto it = receives_.find(op.tag);
  wait(it->second, true);
  input_ = it->second.buffer;
  receives_.erase(it);
}

void StepRun::compute(std::size_t index) {
  const Action& action = ops_[index].action;
  const bool sends_output = index + 1 < ops_.size() && ops_[index + 1].kind == OpKind::send;
  if (sends_output) output_ = take_buffer();
  const bool last_weights = index == last_weight_op_[action.chunk];
  const double start = mark();
  switch (action.kind) {
    case ActionKind::forward:
      compute_.forward(action.chunk, action.microbatch, input_.data(), output_.data());
      break;
    case ActionKind::backward:
    case ActionKind::input_grad: {
      const WeightGrads when = action.kind == ActionKind::backward ? WeightGrads::now : WeightGrads::deferred;
      compute_.backward(action.chunk, action.microbatch, input_.data(), output_.data(), when, last_weights);
      break;
    }
    case ActionKind::weight_grad: compute_.weight_grad(action.chunk, action.microbatch, last_weights); break;
  }
  result_.events.push_back({event_kind(action.kind), action.microbatch, action.chunk, start, mark(), 0});
  if (options_.take_collective_events) {
    for (TimelineEvent& collective : options_.take_collective_events()) {
      collective.microbatch = action.microbatch;
      collective.chunk = action.chunk;
      result_.events.push_back(collective);
    }
  }
  if (input_.data()) free_buffers_.push_back(input_);
  input_ = FloatBuffer();
}

void StepRun::send(const StepOp& op) {
  if (op.peer == rank_) {
    mailbox_.emplace(op.tag, output_);
  } else {
    // The output is complete before the network reads it: NCCL orders the send after its kernels.
    if (!pipeline_.ordered_on_device()) wait_for_device("pipeline send");
    sends_.push_back(
        Transfer{pipeline_.send_async(output_.data(), options_.message_floats, op.peer, wire_tag(op)), output_, op});
  }
  output_ = FloatBuffer();
}

// Waits with the watchdog; records the wait as an event when the message was not already there.
void StepRun::wait(Transfer& transfer, bool receiving) {
  if (transfer.request->test()) return;
  const double start = options_.clock();
  for (int polls = 0; !transfer.request->test(); ++polls) {
    // Polling keeps MPI progressing; sleeping between polls leaves the core to the other ranks of
    // an oversubscribed node.
    if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (options_.clock() - start > options_.timeout_s) options_.on_timeout(describe(transfer, receiving));
  }
  result_.events.push_back({receiving ? EventKind::recv : EventKind::send, transfer.op.action.microbatch,
                            transfer.op.action.chunk, start, options_.clock(),
                            static_cast<std::int64_t>(options_.message_floats * sizeof(float))});
}

std::string StepRun::describe(const Transfer& transfer, bool receiving) const {
  const StepOp& op = transfer.op;
  std::ostringstream text;
  text << "pipeline rank " << rank_ << ", action " << to_string(op.action, chunks_) << ": waited " << options_.timeout_s
       << " s (schedule.timeout_s) to " << (receiving ? "receive the " : "send the ") << direction_name(op.direction)
       << " of micro-batch " << op.action.microbatch << (receiving ? " from " : " to ")
       << (options_.describe_peer ? options_.describe_peer(op.peer) : "pipeline rank " + std::to_string(op.peer))
       << " (tag " << op.tag << "); the peer is stuck, dead or runs a different schedule";
  return text.str();
}

void StepRun::reap_sends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->request->test()) {
      free_buffers_.push_back(it->buffer);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
}

void StepRun::finish() {
  for (Transfer& transfer : sends_) {
    wait(transfer, false);
    free_buffers_.push_back(transfer.buffer);
  }
  sends_.clear();
  if (!receives_.empty() || !mailbox_.empty())
    throw std::logic_error("pipeline rank " + std::to_string(rank_) + ": messages left unconsumed at the end of the step");
}

}  // namespace

PipelineExecutor::PipelineExecutor(const Schedule& schedule, Comm& pipeline, Options options)
    : chunks_(schedule.chunks), last_weight_op_(schedule.chunks, 0), pipeline_(pipeline), options_(std::move(options)) {
  if (pipeline.size() != schedule.stages)
    throw std::invalid_argument("PipelineExecutor: the pipeline group has " + std::to_string(pipeline.size()) +
                                " ranks but the schedule " + std::to_string(schedule.stages) + " stages");
  if (!options_.clock || !options_.on_timeout) throw std::invalid_argument("PipelineExecutor: clock and on_timeout are required");
  if (matches_in_order(options_.p2p))
    if (const std::string problem = find_message_order_problem(schedule); !problem.empty())
      throw std::logic_error("PipelineExecutor: the " + word_of(schedule.kind) +
                             " schedule cannot run with ordered messages: " + problem);
  ops_ = std::move(lower_schedule(schedule)[pipeline.rank()]);
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const ActionKind kind = ops_[i].action.kind;
    if (ops_[i].kind == OpKind::compute && (kind == ActionKind::backward || kind == ActionKind::weight_grad))
      last_weight_op_[ops_[i].action.chunk] = i;
  }
}

PipelineStepResult PipelineExecutor::run_step(StageCompute& compute) {
  if (options_.take_collective_events) options_.take_collective_events();  // not the step's actions'
  return StepRun(ops_, last_weight_op_, chunks_, pipeline_, options_, free_buffers_, compute).run();
}

}  // namespace trident
