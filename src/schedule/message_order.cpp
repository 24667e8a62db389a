#include "schedule/message_order.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "schedule/messages.hpp"

namespace trident {
namespace {

std::string number(int value) { return std::to_string(value); }

std::string ordinal(int k) {
  const int last_two = k % 100, last = k % 10;
  if (last_two >= 11 && last_two <= 13) return number(k) + "th";
  return number(k) + (last == 1 ? "st" : last == 2 ? "nd" : last == 3 ? "rd" : "th");
}

// "micro-batch 2 for virtual stage 5 (sent after F2.1)", "... from virtual stage 4 (received by F2.1)"
std::string message_text(const StepOp& op, int chunks) {
  const bool sent = op.kind == OpKind::send;
  return "micro-batch " + number(op.action.microbatch) + (sent ? " for" : " from") + " virtual stage " +
         number(op.peer_virtual_stage) + (sent ? " (sent after " : " (received by ") + to_string(op.action, chunks) +
         ")";
}

// A channel: from one rank to another, one direction. Its SEND ops on the sender and RECV ops on
// the receiver, each in list order (the order they are posted).
using Channel = std::tuple<int, int, Direction>;
struct ChannelMessages {
  std::vector<const StepOp*> sent, received;
};

std::map<Channel, ChannelMessages> channel_messages(const LoweredSchedule& lowered) {
  std::map<Channel, ChannelMessages> channels;
  for (int rank = 0; rank < static_cast<int>(lowered.size()); ++rank) {
    for (const StepOp& op : lowered[rank]) {
      if (op.kind == OpKind::compute || op.peer == rank) continue;  // hand-offs stay on the rank
      if (op.kind == OpKind::send)
        channels[{rank, op.peer, op.direction}].sent.push_back(&op);
      else
        channels[{op.peer, rank, op.direction}].received.push_back(&op);
    }
  }
  return channels;
}

}  // namespace

std::string find_message_order_problem(const Schedule& schedule) {
  // A valid schedule receives every message it sends, so each channel's two lists are as long.
  const LoweredSchedule lowered = lower_schedule(schedule);  // the channels point into it
  for (const auto& [channel, messages] : channel_messages(lowered)) {
    const auto& [from, to, direction] = channel;
    for (std::size_t k = 0; k < std::min(messages.sent.size(), messages.received.size()); ++k) {
      if (messages.sent[k]->tag == messages.received[k]->tag) continue;
      const std::string nth = ordinal(static_cast<int>(k) + 1);
      return std::string("the ") + direction_name(direction) + " channel from rank " + number(from) + " to rank " +
             number(to) + " is out of order: its " + nth + " message is " +
             message_text(*messages.sent[k], schedule.chunks) + ", but rank " + number(to) + "'s " + nth +
             " receive on it waits for " + message_text(*messages.received[k], schedule.chunks) + ".";
    }
  }
  return "";
}

}  // namespace trident
