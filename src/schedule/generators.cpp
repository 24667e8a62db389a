// The schedule generators: gpipe, 1f1b, interleaved-1f1b and zb-h1 (zb-v and v-half: v_shape.cpp;
// dualpipev: dualpipe_v.cpp), each a rule that
// writes every rank's action list, and the forward-only schedule evaluation runs. They produce data only; validate.cpp
// proves the lists complete and deadlock-free and the tests hold the generators to that for many (p, m, v).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/placement.hpp"
#include "schedule/registry.hpp"
#include "schedule/schedule.hpp"

namespace trident {
namespace {

Action forward(int microbatch, int chunk = 0) { return {ActionKind::forward, microbatch, chunk}; }
Action backward(int microbatch, int chunk = 0) { return {ActionKind::backward, microbatch, chunk}; }
Action input_grad(int microbatch) { return {ActionKind::input_grad, microbatch, 0}; }
Action weight_grad(int microbatch) { return {ActionKind::weight_grad, microbatch, 0}; }

// "interleaved-1f1b, zb-v, v-half and dualpipev": the kinds whose rule is not one chunk per rank.
// "interleaved-1f1b, zb-v, v-half and dualpipev".
std::string kinds_with_chunks_text() {
  const std::vector<std::string_view> words = kinds_with_chunks();
  std::string text;
  for (std::size_t i = 0; i < words.size(); ++i)
    text.append(i == 0 ? "" : i + 1 == words.size() ? " and " : ", ").append(words[i]);
  return text;
}

}  // namespace

// GPipe: every forward, then every backward, both in micro-batch order. Simple, and the peak
// activation memory is all m micro-batches on every rank.
Schedule make_gpipe(int p, int m) {
  Schedule schedule = empty_schedule(ScheduleKind::gpipe, p, m, 1);
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Action>& list = schedule.actions[rank];
    for (int j = 0; j < m; ++j) list.push_back(forward(j));
    for (int j = 0; j < m; ++j) list.push_back(backward(j));
  }
  return schedule;
}

// Megatron's non-interleaved 1F1B (PipeDream-Flush): rank r runs min(p − r − 1, m) warm-up
// forwards, which is just enough that its first backward's gradient arrives as it becomes free;
// then alternates one forward and one backward; then drains the remaining backwards. Rank r never
// holds more than min(p − r, m) micro-batches.
Schedule make_1f1b(int p, int m) {
  Schedule schedule = empty_schedule(ScheduleKind::one_f_one_b, p, m, 1);
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Action>& list = schedule.actions[rank];
    const int warmup = std::min(p - rank - 1, m);
    for (int j = 0; j < warmup; ++j) list.push_back(forward(j));
    for (int i = 0; i < m - warmup; ++i) {
      list.push_back(forward(warmup + i));
      list.push_back(backward(i));
    }
    for (int j = m - warmup; j < m; ++j) list.push_back(backward(j));
  }
  return schedule;
}

// Megatron's interleaved 1F1B (Narayanan et al. 2021, forward_backward_pipelining_with_interleaving).
// Each rank holds v chunks; chunk c of rank r is virtual stage c·p + r. A rank's k-th forward
// works on chunk (k mod p·v) / p for micro-batch (k / p·v)·p + k mod p: groups of p micro-batches
// go through chunk 0, then the same group through chunk 1, and so on. Backwards run in the same
// order with the chunks reversed. Warm-up is (p − r − 1)·2 + (v − 1)·p forwards (the 2 because a
// backward takes about twice a forward), capped at m·v.
//
// Megatron needs m to be a multiple of p (the micro-batch groups must be whole) and we keep that
// rule. Megatron also runs everything as warm-up when m == p; that only serves its fused
// send/receive calls (our sends never block), so here the capped formula applies to m == p too.
Schedule make_interleaved_1f1b(int p, int m, int v) {
  if (v < 2) {
    throw InputError("interleaved-1f1b needs at least 2 chunks (virtual stages) per rank, got " +
                     std::to_string(v) + "; use 1f1b for one chunk per rank");
  }
  if (m % p != 0) {
    throw InputError("interleaved-1f1b needs the micro-batch count to be a multiple of the pipeline "
                     "stages (m % p == 0, Megatron's rule), got m = " +
                     std::to_string(m) + ", p = " + std::to_string(p));
  }
  Schedule schedule = empty_schedule(ScheduleKind::interleaved_1f1b, p, m, v);
  const int total = m * v;  // actions of each kind per rank
  const int group = p * v;
  const auto chunk_of_step = [&](int k, bool is_forward) {
    const int chunk = (k % group) / p;
    return is_forward ? chunk : v - 1 - chunk;
  };
  const auto microbatch_of_step = [&](int k) { return (k / group) * p + k % p; };
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Action>& list = schedule.actions[rank];
    const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
    const auto push_forward = [&](int k) { list.push_back(forward(microbatch_of_step(k), chunk_of_step(k, true))); };
    const auto push_backward = [&](int k) {
      list.push_back(backward(microbatch_of_step(k), chunk_of_step(k, false)));
    };
    for (int k = 0; k < warmup; ++k) push_forward(k);
    for (int k = 0; k < total - warmup; ++k) {
      push_forward(warmup + k);
      push_backward(k);
    }
    for (int k = total - warmup; k < total; ++k) push_backward(k);
  }
  return schedule;
}

// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", fig. 3 top). B is split into I (the
// input gradient the previous stage waits for) and W (the weight gradient nobody waits for). The
// forwards and input gradients follow 1F1B exactly (same warm-up of min(p − r − 1, m) forwards);
// rank r then postpones its weight gradients by r micro-batches: r rounds of "F I", then "F I W"
// rounds, then "I W" rounds, then the postponed W's, which fill the cool-down bubbles that 1F1B
// leaves on the later ranks. Each W is the oldest pending one. Every rank thus holds up to
// min(p, m) micro-batches between F and W: 1F1B's peak (rank 0's), now on every rank. With
// F = I = W the idle time per rank drops from 1F1B's 3(p − 1) to (p − 1).
Schedule make_zb_h1(int p, int m) {
  Schedule schedule = empty_schedule(ScheduleKind::zb_h1, p, m, 1);
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Action>& list = schedule.actions[rank];
    int forwards = 0, inputs = 0, weights = 0;
    const int warmup = std::min(p - rank - 1, m);
    for (; forwards < warmup; ++forwards) list.push_back(forward(forwards));
    for (int round = 0; round < rank && forwards < m; ++round) {
      list.push_back(forward(forwards++));
      list.push_back(input_grad(inputs++));
    }
    while (forwards < m) {
      list.push_back(forward(forwards++));
      list.push_back(input_grad(inputs++));
      list.push_back(weight_grad(weights++));
    }
    while (inputs < m) {
      list.push_back(input_grad(inputs++));
      list.push_back(weight_grad(weights++));
    }
    while (weights < m) list.push_back(weight_grad(weights++));
  }
  return schedule;
}

Schedule empty_schedule(ScheduleKind kind, int stages, int microbatches, int chunks) {
  return empty_schedule(kind, stages, microbatches, chunks, chunk_placement(kind));
}

Schedule empty_schedule(ScheduleKind kind, int stages, int microbatches, int chunks, ChunkPlacement placement) {
  Schedule schedule;
  schedule.kind = kind;
  schedule.stages = stages;
  schedule.microbatches = microbatches;
  schedule.chunks = chunks;
  schedule.placement = placement;
  schedule.virtual_stage.assign(stages, std::vector<int>(chunks, 0));
  for (int rank = 0; rank < stages; ++rank) {
    for (int chunk = 0; chunk < chunks; ++chunk)
      schedule.virtual_stage[rank][chunk] = placed_virtual_stage(placement, stages, chunks, rank, chunk);
  }
  schedule.actions.assign(stages, {});
  return schedule;
}

Schedule forward_only_schedule(const Schedule& training) {
  Schedule schedule = training;
  schedule.forward_only = true;
  for (int rank = 0; rank < schedule.stages; ++rank) {
    std::vector<int> chunks(static_cast<std::size_t>(schedule.chunks));
    for (int chunk = 0; chunk < schedule.chunks; ++chunk) chunks[chunk] = chunk;
    std::ranges::sort(chunks, {}, [&](int chunk) { return schedule.virtual_stage[rank][chunk]; });
    std::vector<Action>& list = schedule.actions[rank];
    list.clear();
    for (const int chunk : chunks)
      for (int j = 0; j < schedule.microbatches; ++j) list.push_back(forward(j, chunk));
  }
  return schedule;
}

Schedule make_schedule(ScheduleKind kind, int stages, int microbatches, int chunks, double activation_budget) {
  return make_schedule(kind, {stages, microbatches, chunks, activation_budget});
}

Schedule make_schedule(ScheduleKind kind, const ScheduleRequest& request) {
  if (request.stages < 1) {
    throw InputError("a pipeline schedule needs at least 1 stage, got p = " + std::to_string(request.stages));
  }
  if (request.microbatches < 1) {
    throw InputError("a pipeline schedule needs at least 1 micro-batch, got m = " +
                     std::to_string(request.microbatches));
  }
  if (kind == ScheduleKind::automatic)
    throw std::logic_error(
        "schedule kind \"auto\" is a choice among the generators, not a generator: call "
        "choose_auto_schedule");
  const ScheduleType& type = schedule_type(kind);
  if (type.chunks == ChunkRule::two_in_a_v && request.chunks != 2)
    throw InputError("schedule kind \"" + word_of(kind) +
                     "\" runs two chunks per rank in a V (virtual_stages = 2), "
                     "got " +
                     std::to_string(request.chunks) + "; set schedule.virtual_stages = 2");
  if (type.chunks == ChunkRule::one && request.chunks != 1) {
    throw InputError("schedule kind \"" + word_of(kind) + "\" runs one chunk per rank (virtual_stages = 1), got " +
                     std::to_string(request.chunks) + "; " + kinds_with_chunks_text() + " use more than one chunk");
  }
  return type.generate(request);
}

}  // namespace trident
