#include "pipeline/executor.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace trident {

namespace {

enum class Direction { activation = 0, gradient = 1 };

const char* direction_name(Direction direction) {
  return direction == Direction::activation ? "activation" : "gradient";
}

// Unique within a step per (micro-batch, receiving virtual stage, direction).
int message_tag(int microbatch, int receiver_virtual_stage, Direction direction, int virtual_stages) {
  return (microbatch * virtual_stages + receiver_virtual_stage) * 2 + static_cast<int>(direction);
}

// One message an action receives before it runs, or sends after.
struct MessageSpec {
  int peer = -1;  // pipeline rank; -1: none
  int tag = 0;
  Direction direction = Direction::activation;
  bool exists() const { return peer >= 0; }
};

struct ActionMessages {
  MessageSpec receive, send;
};

ActionMessages messages_of(const Schedule& s, int rank, const Action& action) {
  const int vs = s.virtual_stage[rank][action.chunk];
  const int last = s.virtual_stages() - 1;
  const int j = action.microbatch;
  const int VS = s.virtual_stages();
  ActionMessages m;
  switch (action.kind) {
    case ActionKind::forward:
      if (vs > 0) m.receive = {s.rank_of(vs - 1), message_tag(j, vs, Direction::activation, VS), Direction::activation};
      if (vs < last) m.send = {s.rank_of(vs + 1), message_tag(j, vs + 1, Direction::activation, VS), Direction::activation};
      break;
    case ActionKind::backward:
    case ActionKind::input_grad:
      if (vs < last) m.receive = {s.rank_of(vs + 1), message_tag(j, vs, Direction::gradient, VS), Direction::gradient};
      if (vs > 0) m.send = {s.rank_of(vs - 1), message_tag(j, vs - 1, Direction::gradient, VS), Direction::gradient};
      break;
    case ActionKind::weight_grad:
      break;
  }
  return m;
}

EventKind event_kind(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return EventKind::forward;
    case ActionKind::backward: return EventKind::backward;
    case ActionKind::input_grad: return EventKind::input_grad;
    case ActionKind::weight_grad: return EventKind::weight_grad;
  }
  return EventKind::forward;
}

// Receives are posted for this many upcoming receiving actions: enough that a message never waits
// for its receive while the rank computes, few enough to bound the buffers.
constexpr std::size_t kReceivesAhead = 4;

}  // namespace

struct PipelineExecutor::Transfer {
  CommRequestPtr request;
  FloatBuffer buffer;
  MessageSpec spec;
  Action action;  // the action that sends or will consume it
};

PipelineExecutor::PipelineExecutor(const Schedule& schedule, Comm& pipeline, Options options)
    : schedule_(schedule), pipeline_(pipeline), options_(std::move(options)), rank_(pipeline.rank()) {
  if (pipeline.size() != schedule.stages)
    throw std::invalid_argument("PipelineExecutor: the pipeline group has " + std::to_string(pipeline.size()) +
                                " ranks but the schedule " + std::to_string(schedule.stages) + " stages");
  if (!options_.clock || !options_.on_timeout) throw std::invalid_argument("PipelineExecutor: clock and on_timeout are required");
}

PipelineStepResult PipelineExecutor::run_step(StageCompute& compute) {
  const std::vector<Action>& actions = schedule_.actions[rank_];
  const int chunks = schedule_.chunks;
  PipelineStepResult result;
  auto take_buffer = [&] {
    if (free_buffers_.empty())
      return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("pipeline_message")),
                         options_.message_floats);
    FloatBuffer buffer = free_buffers_.back();
    free_buffers_.pop_back();
    return buffer;
  };
  auto describe = [&](const Transfer& t, bool receiving) {
    std::ostringstream text;
    text << "pipeline rank " << rank_ << ", action " << to_string(t.action, chunks) << ": waited "
         << options_.timeout_s << " s (schedule.timeout_s) to " << (receiving ? "receive the " : "send the ")
         << direction_name(t.spec.direction) << " of micro-batch " << t.action.microbatch
         << (receiving ? " from" : " to") << " pipeline rank " << t.spec.peer << " (tag " << t.spec.tag
         << "); the peer is stuck, dead or runs a different schedule";
    return text.str();
  };
  // Waits with the watchdog; records the wait as an event when the message was not already there.
  auto wait = [&](Transfer& t, bool receiving) {
    if (t.request->test()) return;
    const double start = options_.clock();
    for (int polls = 0; !t.request->test(); ++polls) {
      // Polling keeps MPI progressing; sleeping between polls leaves the core to the other ranks
      // of an oversubscribed node.
      if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (options_.clock() - start > options_.timeout_s) options_.on_timeout(describe(t, receiving));
    }
    result.events.push_back({receiving ? EventKind::recv : EventKind::send, t.action.microbatch, t.action.chunk, start,
                             options_.clock(), static_cast<std::int64_t>(options_.message_floats * sizeof(float))});
  };

  // Per action, its messages; per chunk, the action after which its weight gradients are final.
  std::vector<ActionMessages> messages;
  std::vector<int> last_weight_action(chunks, -1);
  std::vector<std::size_t> receiving_actions;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    messages.push_back(messages_of(schedule_, rank_, actions[i]));
    if (messages.back().receive.exists()) receiving_actions.push_back(i);
    if (actions[i].kind == ActionKind::backward || actions[i].kind == ActionKind::weight_grad)
      last_weight_action[actions[i].chunk] = static_cast<int>(i);
  }

  std::map<int, Transfer> receives;        // posted, by tag
  std::map<int, FloatBuffer> local_mailbox;  // messages between two chunks of this rank, by tag
  std::vector<Transfer> sends;
  std::size_t next_receive = 0;  // index in receiving_actions of the next receive to post
  // Posts the receives of the next kReceivesAhead receiving actions from action `current` on.
  auto post_receives_from = [&](std::size_t current) {
    const std::size_t first_pending =
        std::lower_bound(receiving_actions.begin(), receiving_actions.end(), current) - receiving_actions.begin();
    for (; next_receive < std::min(first_pending + kReceivesAhead, receiving_actions.size()); ++next_receive) {
      const std::size_t i = receiving_actions[next_receive];
      const MessageSpec& spec = messages[i].receive;
      if (spec.peer == rank_) continue;  // handed over locally
      Transfer t{nullptr, take_buffer(), spec, actions[i]};
      t.request = pipeline_.recv_async(t.buffer.data(), options_.message_floats, spec.peer, spec.tag);
      receives.emplace(spec.tag, std::move(t));
    }
  };
  auto reap_sends = [&] {
    for (auto it = sends.begin(); it != sends.end();) {
      if (it->request->test()) {
        free_buffers_.push_back(it->buffer);
        it = sends.erase(it);
      } else {
        ++it;
      }
    }
  };

  compute.progress = [&] {
    for (auto& [tag, receive] : receives) receive.request->test();
    for (Transfer& send : sends) send.request->test();
  };
  struct ClearProgress {  // the callback refers to this step's locals
    StageCompute& compute;
    ~ClearProgress() { compute.progress = nullptr; }
  } clear_progress{compute};
  int in_flight = 0;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action& action = actions[i];
    const ActionMessages& m = messages[i];
    post_receives_from(i);

    FloatBuffer input, output;
    if (m.receive.exists()) {
      if (m.receive.peer == rank_) {
        const auto it = local_mailbox.find(m.receive.tag);
        if (it == local_mailbox.end())
          throw std::logic_error("pipeline rank " + std::to_string(rank_) + ": " + to_string(action, chunks) +
                                 " runs before the action on this rank that produces its input");
        input = it->second;
        local_mailbox.erase(it);
      } else {
        const auto it = receives.find(m.receive.tag);
        wait(it->second, true);
        input = it->second.buffer;
        receives.erase(it);
      }
    }
    if (m.send.exists()) output = take_buffer();

    const double start = options_.clock();
    const bool last_weights = static_cast<int>(i) == last_weight_action[action.chunk];
    switch (action.kind) {
      case ActionKind::forward:
        result.loss_sum += compute.forward(action.chunk, action.microbatch, input.data(), output.data());
        result.peak_in_flight = std::max(result.peak_in_flight, ++in_flight);
        break;
      case ActionKind::backward:
      case ActionKind::input_grad: {
        const WeightGrads when = action.kind == ActionKind::backward ? WeightGrads::now : WeightGrads::deferred;
        compute.backward(action.chunk, action.microbatch, input.data(), output.data(), when, last_weights);
        if (action.kind == ActionKind::backward) --in_flight;
        break;
      }
      case ActionKind::weight_grad:
        compute.weight_grad(action.chunk, action.microbatch, last_weights);
        --in_flight;
        break;
    }
    result.events.push_back({event_kind(action.kind), action.microbatch, action.chunk, start, options_.clock(), 0});

    if (input.data()) free_buffers_.push_back(input);
    if (m.send.exists()) {
      if (m.send.peer == rank_) {
        local_mailbox.emplace(m.send.tag, output);
      } else {
        Kokkos::fence();  // the output is complete before the network reads it
        Transfer t{pipeline_.send_async(output.data(), options_.message_floats, m.send.peer, m.send.tag), output,
                   m.send, action};
        sends.push_back(std::move(t));
      }
    }
    reap_sends();
  }
  for (Transfer& t : sends) {
    wait(t, false);
    free_buffers_.push_back(t.buffer);
  }
  if (!receives.empty() || !local_mailbox.empty())
    throw std::logic_error("pipeline rank " + std::to_string(rank_) + ": messages left unconsumed at the end of the step");
  return result;
}

}  // namespace trident
