// The generators of the one-line and interleaved schedules (generators.cpp; the V shapes':
// v_shape.hpp, dualpipe_v.hpp): p stages, m micro-batches, each a rule that writes every rank's
// action list. schedule/registry.cpp names each as its kind's generator.
#pragma once

#include "schedule/schedule.hpp"

namespace trident {

Schedule make_gpipe(int p, int m);
Schedule make_1f1b(int p, int m);
// InputError unless v >= 2 and m is a multiple of p (Megatron's rule).
Schedule make_interleaved_1f1b(int p, int m, int v);
Schedule make_zb_h1(int p, int m);

}  // namespace trident
