// The dualpipev schedule: DeepSeek's DualPipeV order on the V placement (see dualpipe_v.cpp).
#pragma once

#include "schedule/schedule.hpp"

namespace trident {

// p stages, m >= 2p micro-batches (InputError otherwise), two chunks per rank.
Schedule make_dualpipe_v(int stages, int microbatches);

}  // namespace trident
