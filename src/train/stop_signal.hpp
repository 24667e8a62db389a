// Batch systems ask a job to stop with a signal (Slurm's --signal=USR1@secs before the walltime,
// SIGTERM on preemption or scancel). The handler only records it; the step loop looks at step
// boundaries, all ranks agree, checkpoint and exit with code 3 ("checkpointed, resubmit me").
#pragma once

namespace trident {

// Installs the handlers for SIGUSR1 and SIGTERM (idempotent).
void install_stop_signal_handlers();

// The signal number received since start-up, or 0.
int received_stop_signal();

}  // namespace trident
