#include "schedule/registry.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "schedule/dualpipe_v.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule.hpp"
#include "schedule/v_shape.hpp"

namespace trident {
namespace {

// Peak activations in flight, in micro-batches of a whole rank (DESIGN.md "Schedules are data").
// gpipe: every forward runs before the first backward, one stage too.
double all_microbatches(const ScheduleRequest& r, int) { return r.microbatches; }
// 1f1b: rank s's warm-up of p − s − 1 forwards plus one; with one stage each micro-batch runs
// forward then backward.
double one_f_one_b_warm_up(const ScheduleRequest& r, int stage) {
  return r.stages == 1 ? 1.0 : std::min(r.stages - stage, r.microbatches);
}
// zb-h1: 1F1B's forwards, each rank's W postponed by its rank, so that every rank holds rank 0's
// min(p, m) between F and W.
double one_f_one_b_first_rank(const ScheduleRequest& r, int) {
  return r.stages == 1 ? 1.0 : std::min(r.stages, r.microbatches);
}
// interleaved-1f1b: Megatron's warm-up of 2 (p − s − 1) + (v − 1) p chunks, plus one.
double interleaved_warm_up(const ScheduleRequest& r, int stage) {
  if (r.stages == 1) return 1.0;
  const int warm_up = 2 * (r.stages - stage - 1) + (r.chunks - 1) * r.stages;
  return static_cast<double>(std::min(warm_up + 1, r.microbatches * r.chunks)) / r.chunks;
}
// zb-v, v-half: the bound their generator keeps (v_shape_activation_cap chunks).
template <ScheduleKind kind>
double v_shape_cap(const ScheduleRequest& r, int) {
  if (r.stages == 1) return 1.0;
  return std::min(v_shape_activation_cap(kind, r.stages, r.activation_budget), 2 * r.microbatches) / 2.0;
}
// dualpipev: 2p chunks after its two forward phases, one more in each F-B pair.
double dualpipe_v_phases(const ScheduleRequest& r, int) { return std::min(2 * r.stages + 1, 2 * r.microbatches) / 2.0; }

template <ScheduleKind kind>
Schedule v_shape(const ScheduleRequest& r) {
  if (r.costs == nullptr) return make_v_shape(kind, r.stages, r.microbatches, r.activation_budget);
  return make_v_shape(kind, r.stages, r.microbatches, r.activation_budget, *r.costs);
}

using enum ScheduleKind;
using enum ChunkRule;
using enum BubbleTheory;
constexpr ChunkPlacement kLine = ChunkPlacement::interleaved, kV = ChunkPlacement::v_shape;

// kind, word, placement, chunks, m in groups of p, m per stage at least, generator, peak in flight,
// bubble, auto's preference, re-planning, search
constexpr std::array<ScheduleType, 7> kTypes{{
    {gpipe, "gpipe", kLine, one, false, 0,
     [](const ScheduleRequest& r) { return make_gpipe(r.stages, r.microbatches); }, all_microbatches, textbook, 1, true,
     false},
    {one_f_one_b, "1f1b", kLine, one, false, 0,
     [](const ScheduleRequest& r) { return make_1f1b(r.stages, r.microbatches); }, one_f_one_b_warm_up, textbook, 2,
     true, true},
    {interleaved_1f1b, "interleaved-1f1b", kLine, two_or_more, true, 0,
     [](const ScheduleRequest& r) { return make_interleaved_1f1b(r.stages, r.microbatches, r.chunks); },
     interleaved_warm_up, interleaved, 4, false, true},
    {zb_h1, "zb-h1", kLine, one, false, 0,
     [](const ScheduleRequest& r) { return make_zb_h1(r.stages, r.microbatches); }, one_f_one_b_first_rank,
     below_textbook, 3, true, true},
    {zb_v, "zb-v", kV, two_in_a_v, false, 0, v_shape<zb_v>, v_shape_cap<zb_v>, below_textbook, 5, true, true},
    {v_half, "v-half", kV, two_in_a_v, false, 0, v_shape<v_half>, v_shape_cap<v_half>, below_textbook, 7, true, false},
    {dualpipe_v, "dualpipev", kV, two_in_a_v, false, 2,
     [](const ScheduleRequest& r) { return make_dualpipe_v(r.stages, r.microbatches); }, dualpipe_v_phases,
     below_textbook, 6, true, true},
}};

constexpr std::size_t kWords = kTypes.size() + 2;
constexpr std::array<Choice<ScheduleKind>, kWords> words_of_kinds() {
  std::array<Choice<ScheduleKind>, kWords> words{};
  for (std::size_t i = 0; i < kTypes.size(); ++i) words[i] = {kTypes[i].kind, kTypes[i].word};
  words[kTypes.size()] = {automatic, "auto"};
  words[kTypes.size() + 1] = {file, "file"};
  return words;
}

}  // namespace

std::span<const Choice<ScheduleKind>> choices(ScheduleKind) {
  static const std::array<Choice<ScheduleKind>, kWords> words = words_of_kinds();
  return words;
}

std::span<const ScheduleType> schedule_types() { return kTypes; }

const ScheduleType* find_schedule_type(ScheduleKind kind) {
  for (const ScheduleType& type : kTypes)
    if (type.kind == kind) return &type;
  return nullptr;
}

const ScheduleType& schedule_type(ScheduleKind kind) {
  if (const ScheduleType* type = find_schedule_type(kind)) return *type;
  throw std::logic_error("schedule_type: \"" + word_of(kind) + "\" has no generator of its own");
}

ChunkPlacement chunk_placement(ScheduleKind kind) {
  return kind == automatic ? ChunkPlacement::interleaved : schedule_type(kind).placement;
}

std::vector<std::string_view> kinds_with_chunks() {
  std::vector<std::string_view> words;
  for (const ScheduleType& type : schedule_types())
    if (type.chunks != ChunkRule::one) words.push_back(type.word);
  return words;
}

bool runs_on(const ScheduleType& type, int stages, int microbatches, int chunks) {
  const bool chunks_fit = type.chunks == one ? chunks == 1 : type.chunks == two_in_a_v ? chunks == 2 : chunks >= 2;
  return chunks_fit && microbatches >= type.min_microbatches_per_stage * stages &&
         (!type.microbatches_in_groups_of_stages || microbatches % stages == 0);
}

}  // namespace trident
