// DualPipeV (DeepSeek-V3 technical report, section 3.2, and deepseek-ai/DualPipe's "cut-in-half"
// variant): the V placement of zb-v (rank r holds virtual stages r and 2p − 1 − r) with an order in
// eight phases per rank, whose steady phase pairs the forward of one chunk with the backward of the
// other ("F0 B1", "F1 B0"). On GPUs each pair is one action whose computation hides the other's
// communication; trident runs a pair as two consecutive actions, so on the CPU the pairing shapes
// the order only. Backwards are whole (B) in the steady phase and split (I now, W queued) in the
// warm-up's third phase and the second half of the cool-down, where the W's fill the idle time.
#include "schedule/dualpipe_v.hpp"

#include <deque>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace trident {
namespace {

// One rank's list, built phase by phase: the next micro-batch of each chunk for F and for B (or
// I), and the queue of deferred W's.
class RankOrder {
 public:
  explicit RankOrder(std::vector<Action>& list) : list_(list) {}

  void forward(int chunk) { list_.push_back({ActionKind::forward, next_forward_[chunk]++, chunk}); }

  // A whole B, or with `split` an I now and its W queued.
  void backward(int chunk, bool split = false) {
    const int microbatch = next_backward_[chunk]++;
    if (!split) {
      list_.push_back({ActionKind::backward, microbatch, chunk});
      return;
    }
    list_.push_back({ActionKind::input_grad, microbatch, chunk});
    weights_.push_back({ActionKind::weight_grad, microbatch, chunk});
  }

  void weight() {
    list_.push_back(weights_.front());
    weights_.pop_front();
  }

  // The pair a GPU would overlap: the forward of one chunk, the backward of the other.
  void forward_backward(int forward_chunk, int backward_chunk) {
    forward(forward_chunk);
    backward(backward_chunk);
  }

 private:
  std::vector<Action>& list_;
  int next_forward_[2] = {0, 0};
  int next_backward_[2] = {0, 0};
  std::deque<Action> weights_;
};

void order_rank(std::vector<Action>& list, int p, int m, int r) {
  RankOrder order(list);
  for (int i = 0; i < 2 * (p - r - 1); ++i) order.forward(0);  // 1: down the V
  for (int i = 0; i <= r; ++i) {                               // 2: both chunks
    order.forward(0);
    order.forward(1);
  }
  for (int i = 0; i < p - r - 1; ++i) {  // 3: the first backwards, zero-bubble style
    order.backward(1, true);
    order.weight();
    order.forward(1);
  }
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {  // 4: the steady pairs
    order.forward_backward(0, 1);
    order.forward_backward(1, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) {  // 5: the last forwards
    order.backward(1);
    order.forward_backward(1, 0);
  }
  const int half = (r + 1) / 2;  // 6: backwards of both chunks, split from the middle on
  for (int i = 0; i <= r; ++i) {
    order.backward(1, r % 2 == 1 ? i >= half : i > half);
    order.backward(0, i >= half);
  }
  for (int i = 0; i < p - r - 1; ++i) {  // 7: W's fill the drain
    order.weight();
    order.backward(0, true);
  }
  for (int i = 0; i <= r; ++i) order.weight();  // 8: the W's left
}

}  // namespace

Schedule make_dualpipe_v(int stages, int microbatches) {
  if (microbatches < 2 * stages)
    throw InputError("dualpipev needs at least 2 micro-batches per pipeline stage (m >= 2p), got m = " +
                     std::to_string(microbatches) + ", p = " + std::to_string(stages) +
                     "; raise schedule.microbatches to " + std::to_string(2 * stages) + " or use zb-v");
  Schedule schedule = empty_schedule(ScheduleKind::dualpipe_v, stages, microbatches, 2);
  for (int rank = 0; rank < stages; ++rank) order_rank(schedule.actions[rank], stages, microbatches, rank);
  return schedule;
}

}  // namespace trident
