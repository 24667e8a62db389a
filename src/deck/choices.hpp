// The deck's words for each fixed choice, and the enums they parse to. One table per choice serves
// the parser (which word is valid, and a suggestion for a typo) and every place that prints the
// choice back (banner, plan report, timeline attributes), so a word is spelled in one place only.
// Modules compare enums, never strings.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>

#include "common/choice.hpp"
#include "family/model_config.hpp"
#include "schedule/registry.hpp"

namespace trident {

// model.family and model.attention: family/model_config.hpp (ModelFamily, AttentionKernel).

// schedule.kind: schedule/registry.hpp (ScheduleKind, ChunkPlacement and their words).

// schedule.recompute: full keeps only each chunk's input and re-runs its forward in backward.
// full: keep each chunk's input, re-run its forward before backward; selective: keep everything
// but the attention probabilities, recomputed from q and k in backward.
enum class Recompute { none, full, selective };
inline constexpr std::array<Choice<Recompute>, 3> kRecomputeModes{
    {{Recompute::none, "none"}, {Recompute::full, "full"}, {Recompute::selective, "selective"}}};
constexpr const auto& choices(Recompute) { return kRecomputeModes; }

// parallel.p2p: how pipeline messages find their receive. tagged ("mpi"): MPI matches each by its
// tag (micro-batch, virtual stage, direction); ordered: by posting order alone, one FIFO per pair
// of ranks and direction, as NCCL matches them (schedule/message_order.hpp proves the schedule
// allows it), over MPI; nccl: the same order over NCCL (the GPU build). automatic: nccl on the GPU
// build, tagged on the CPU build (grid/process_grid.hpp resolves it).
enum class P2pMatching { automatic, tagged, ordered, nccl };
inline constexpr std::array<Choice<P2pMatching>, 4> kP2pMatchings{{{P2pMatching::automatic, "auto"},
                                                                   {P2pMatching::tagged, "mpi"},
                                                                   {P2pMatching::ordered, "ordered"},
                                                                   {P2pMatching::nccl, "nccl"}}};
constexpr const auto& choices(P2pMatching) { return kP2pMatchings; }
// Whether messages pair up by posting order (the tag names the direction, not the message).
constexpr bool matches_in_order(P2pMatching matching) {
  return matching == P2pMatching::ordered || matching == P2pMatching::nccl;
}

// The grid's four axes: tensor, context, pipeline and data parallelism.
enum class Axis { tp, cp, pp, dp };
inline constexpr std::array<Choice<Axis>, 4> kAxes{
    {{Axis::tp, "tp"}, {Axis::cp, "cp"}, {Axis::pp, "pp"}, {Axis::dp, "dp"}}};
constexpr const auto& choices(Axis) { return kAxes; }

// parallel.order: the axes fastest-varying first in the world rank, as "tp-cp-dp-pp". A word of
// the three other axes ("tp-dp-pp", as decks spelled it before context parallelism) puts cp right
// after tp: a cp group then shares a node with its tp group. The table is generated, not typed:
// first the three-axis words (which the banner prints where they apply), then all 24 four-axis ones.
using AxisOrder = std::array<Axis, 4>;
namespace axis_order_words {
struct Word {
  AxisOrder order;
  std::array<char, 12> text;  // "tp-cp-dp-pp" and its terminator
};
constexpr std::array<char, 12> spell(const AxisOrder& order, bool with_cp) {
  std::array<char, 12> text{};
  int at = 0;
  for (Axis axis : order) {
    if (axis == Axis::cp && !with_cp) continue;
    if (at > 0) text[at++] = '-';
    for (char c : kAxes[static_cast<int>(axis)].word) text[at++] = c;
  }
  return text;
}
constexpr bool cp_follows_tp(const AxisOrder& order) {
  for (int i = 0; i + 1 < 4; ++i)
    if (order[i] == Axis::tp) return order[i + 1] == Axis::cp;
  return false;
}
inline constexpr std::array<Word, 30> kWords = [] {
  std::array<Word, 30> words{};
  int n = 0;
  for (bool with_cp : {false, true}) {
    AxisOrder order{Axis::tp, Axis::cp, Axis::pp, Axis::dp};
    do {
      if (with_cp || cp_follows_tp(order)) words[n++] = {order, spell(order, with_cp)};
    } while (std::next_permutation(order.begin(), order.end()));
  }
  return words;
}();
}  // namespace axis_order_words
inline constexpr std::array<Choice<AxisOrder>, 30> kAxisOrders = [] {
  std::array<Choice<AxisOrder>, 30> choices{};
  for (std::size_t i = 0; i < choices.size(); ++i)
    choices[i] = {axis_order_words::kWords[i].order, std::string_view(axis_order_words::kWords[i].text.data())};
  return choices;
}();
constexpr const auto& choices(AxisOrder) { return kAxisOrders; }

enum class LrDecay { cosine, linear, constant };
inline constexpr std::array<Choice<LrDecay>, 3> kLrDecays{
    {{LrDecay::cosine, "cosine"}, {LrDecay::linear, "linear"}, {LrDecay::constant, "constant"}}};
constexpr const auto& choices(LrDecay) { return kLrDecays; }

// What the matrix products read: their inputs as stored (fp32), or rounded to TF32 (10-bit
// significand) or bf16 (7-bit), always with fp32 accumulation; master weights, the optimizer and
// every other kernel stay fp32. `automatic`: fp32 on the CPU build, TF32 on the GPU build.
enum class MatmulPrecision { automatic, fp32, tf32, bf16 };
inline constexpr std::array<Choice<MatmulPrecision>, 4> kMatmulPrecisions{{{MatmulPrecision::automatic, "auto"},
                                                                           {MatmulPrecision::fp32, "fp32"},
                                                                           {MatmulPrecision::tf32, "tf32"},
                                                                           {MatmulPrecision::bf16, "bf16"}}};
constexpr const auto& choices(MatmulPrecision) { return kMatmulPrecisions; }

// checkpoint.on_failure: what a checkpoint that cannot be written (a full disk, an I/O error) does
// to the run. abort: exit 1 once the partial file is removed; continue: warn, train on, and try
// again at the next checkpoint.
enum class CheckpointFailure { abort, continue_training };
inline constexpr std::array<Choice<CheckpointFailure>, 2> kCheckpointFailures{
    {{CheckpointFailure::abort, "abort"}, {CheckpointFailure::continue_training, "continue"}}};
constexpr const auto& choices(CheckpointFailure) { return kCheckpointFailures; }

enum class DataKind { bin, text, synthetic, megatron };
inline constexpr std::array<Choice<DataKind>, 4> kDataKinds{{{DataKind::bin, "bin"},
                                                             {DataKind::text, "text"},
                                                             {DataKind::synthetic, "synthetic"},
                                                             {DataKind::megatron, "megatron"}}};
constexpr const auto& choices(DataKind) { return kDataKinds; }

}  // namespace trident
