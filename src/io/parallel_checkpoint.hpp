// Checkpoint files in the contract layout (DESIGN.md "Checkpoint"), written and read collectively
// with MPI-IO: every rank writes / reads the boxes it holds (tensor_slice.hpp) of whole, unsharded
// float32 datasets, so any grid can read any other grid's checkpoint. Each dataset carries a
// uint64 "checksum" attribute that the reader verifies; the file is committed by the protocol of
// checkpoint_files.hpp (complete or absent).
//
// Failures are collective: after each phase the ranks agree (an all-reduce), and every rank throws
// the same exception with the message of the lowest failing rank, so no rank is left waiting in a
// collective that the others abandoned. std::invalid_argument: the caller's descriptions are wrong
// (boxes that do not fit, ranks that disagree on the tensors or attributes, boxes that do not
// cover a tensor exactly once). CheckpointError: the file or the file system failed.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "io/checkpoint_files.hpp"
#include "io/hdf5_attributes.hpp"
#include "io/tensor_slice.hpp"

namespace trident {

// A checkpoint that cannot be written, opened, or trusted: missing dataset, wrong shape or type,
// checksum mismatch, truncated or foreign file. The message names the file and the dataset.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Collective over `comm`: every rank passes the same paths, global shapes and attributes in the same
// order (datasets and attributes are created collectively; this is checked). Each rank's boxes must
// not overlap other ranks' boxes, and together they must cover every element (the element counts
// are checked). Writes <dir>/step_XXXXXXXX.h5.tmp (dir created if missing; float32 contiguous
// datasets, groups created as needed), a uint64 "checksum" attribute on every dataset (the sum of
// slice_checksum over the ranks), the root `attributes`; flushes (MPI_File_sync), closes, barriers;
// then rank 0 commits (commit_checkpoint: rename to step_XXXXXXXX.h5, rewrite `latest`, keep the
// newest `keep`, delete stale *.tmp). Returns the final path on every rank. Before any HDF5 call,
// rank 0 checks that the directory can take the file now (check_disk_space: full disk, quota,
// permission). When that or a write fails, every rank throws the same CheckpointError, naming the
// OS's reason where a rank saw one and the space needed and free, once rank 0 has removed the
// partial file: `latest` and the previous checkpoints are untouched. (A write that fails half-way
// can leave parallel HDF5 unable to close the file alike on every rank: that wait is watched,
// common/watchdog.hpp, and ends the job.)
std::string write_checkpoint_collective(MPI_Comm comm, const std::string& dir, int step, int keep,
                                        const std::vector<TensorSlice>& tensors, const Attributes& attributes);

// Collective over `comm`: every rank passes the same paths and global shapes in the same order.
// Opens `path` with MPI-IO (CheckpointError naming the file if it cannot: truncated, not HDF5,
// absent), checks that every tensor's dataset exists, is float32 and has global_shape (else
// CheckpointError naming file and dataset: "missing", "shape [..] but expected [..]"), reads each
// rank's boxes into its data, and verifies the checksums: count_for_checksum[i] says whether this
// rank's boxes of tensor i are counted; the caller makes each element of every tensor counted exactly
// once across the ranks (checked by element counts). The counted sums are all-reduced and compared
// with the dataset's attribute (mismatch: CheckpointError naming the dataset). Returns the root
// attributes (read_attributes; e.g. int64 "step", strings "deck" and "grid").
Attributes read_checkpoint_collective(MPI_Comm comm, const std::string& path, const std::vector<TensorSlice>& tensors,
                                      const std::vector<bool>& count_for_checksum);

}  // namespace trident
