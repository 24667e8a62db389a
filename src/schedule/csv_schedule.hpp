// Schedules as CSV action lists, the layout PyTorch's pipelining (and so torchtitan) reads and
// writes: one row per pipeline rank, in rank order, each cell one action "{stage}{F|B|I|W}{micro-
// batch}" in the rank's order (stage: the virtual stage in model order, 0 … p·v − 1; B a whole
// backward, I its input gradient and W its weight gradient), empty cells ignored. trident writes
// any schedule so (`trident plan DECK --show-schedule --csv`) and runs one read from a file
// (`schedule.kind = "file"`, `schedule.file`). Pure C++.
#pragma once

#include <string>
#include <string_view>

#include "schedule/schedule.hpp"

namespace trident {

// One line per rank, actions separated by commas, ending with a newline.
std::string schedule_csv(const Schedule& schedule);

// The schedule of `text`, of kind `file`: p = its rows, p·v = the stages its actions name, m = the
// micro-batches they name; the stages placed on the ranks as trident places chunks (interleaved:
// stage s on rank s mod p; a V, v = 2: stage s on rank s, or 2p − 1 − s). Then validated as every
// schedule is (each micro-batch's F and B, or F, I and W, exactly once on every stage; no deadlock).
// Throws InputError naming the row (1 = rank 0), the action and what is wrong.
Schedule read_schedule_csv(std::string_view text);

}  // namespace trident
