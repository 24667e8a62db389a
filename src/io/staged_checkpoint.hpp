// A checkpoint file written in three stages, so that the bulk of it, the data, can be written while
// training goes on (checkpoint.async). The file, its layout and its commit are those of
// write_checkpoint_collective (parallel_checkpoint.hpp): complete or absent, any grid reads it.
//
//   1. create_staged_checkpoint (collective, the main thread): the same checks as the one-call
//      writer, then <dir>/step_XXXXXXXX.h5.tmp with every dataset's storage placed in the file and
//      the root attributes; the file is closed again.
//   2. write_staged_data (any thread, alone): this rank's boxes written with pwrite at their byte
//      offsets in the file, fsync'ed, and their checksums summed. No MPI and no HDF5 here: Debian's
//      parallel HDF5 is not thread-safe, and MPI runs MPI_THREAD_FUNNELED.
//   3. commit_staged_checkpoint (collective, the main thread, once every rank's stage 2 is over):
//      the ranks agree that their data was written, the checksum attributes are added, and rank 0
//      commits (rename, `latest`, keep).
// A process killed during stage 2 leaves the .tmp file, which `latest` never names and the next
// commit deletes.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_attributes.hpp"
#include "io/tensor_slice.hpp"

namespace trident {

struct StagedCheckpoint {
  std::string dir, tmp_path, final_path;
  int keep = 1;
  std::int64_t planned_bytes = 0;         // the file's size bound (disk space messages)
  std::vector<TensorSlice> tensors;       // their data must stay untouched until stage 2 is over
  std::vector<std::int64_t> data_offsets;  // byte offset of each dataset's storage in the file
};

// Stage 1. Collective over `comm`, with the arguments and the failures of
// write_checkpoint_collective: std::invalid_argument for wrong descriptions, CheckpointError (on
// every rank alike, the partial file removed) when the directory cannot take the file.
StagedCheckpoint create_staged_checkpoint(MPI_Comm comm, const std::string& dir, int step, int keep,
                                          const std::vector<TensorSlice>& tensors, const Attributes& attributes);

// What stage 2 did on this rank.
struct StagedWrite {
  std::vector<std::uint64_t> checksums;  // slice_checksum of each tensor's boxes
  std::int64_t bytes = 0;                // written by this rank
  std::string failure;                   // empty, or what failed with the OS's reason
};

// Stage 2. Never throws: a failure is returned for stage 3 to agree on. `pause_s` > 0 (tests only)
// sleeps that long after the first tensor's data, so that a test can kill the process mid-write.
StagedWrite write_staged_data(const StagedCheckpoint& checkpoint, double pause_s = 0.0);

// Stage 3. Collective over `comm`: when any rank's stage 2 failed, rank 0 removes the file and every
// rank throws the same CheckpointError (the OS's reason, the space needed and free); otherwise
// writes the summed checksums, closes, and commits. Returns the final path.
std::string commit_staged_checkpoint(MPI_Comm comm, const StagedCheckpoint& checkpoint, const StagedWrite& written);

}  // namespace trident
