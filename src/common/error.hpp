// The two kinds of failure the command line distinguishes (DESIGN.md, "Command line"):
// InputError = the user's deck, data, checkpoint or arguments are wrong (exit code 2);
// anything else thrown is a runtime failure (exit code 1). A run stopped by SIGUSR1 / SIGTERM
// exits with 3 once its checkpoint is saved; a job the watchdog ends (a peer stopped answering)
// with 4.
#pragma once

#include <stdexcept>
#include <string>

namespace trident {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A runtime failure that every rank throws at the same point, having agreed on it (a checkpoint
// that cannot be written): the ranks can all exit normally, with clean-up, instead of through
// MPI_Abort. Rank 0's message is the complete one.
struct CollectiveFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeFailure = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitCheckpointed = 3;  // stopped by a signal after saving a checkpoint: resubmit
// A rank waited longer than schedule.timeout_s for a peer (stopped, hung, dead or unreachable): the
// job ended; it may resume from its latest checkpoint once the peer's node is healthy.
inline constexpr int kExitPeerLost = 4;

}  // namespace trident
