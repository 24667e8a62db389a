// The steps that the checkpoint writers share (parallel_checkpoint.cpp writes a file in one
// collective call; staged_checkpoint.cpp creates it, lets a background thread write the data and
// commits it later): agreement on failures, the checks that need every rank's view, and the file's
// datasets created through parallel HDF5.
#pragma once

#include <mpi.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/hdf5_attributes.hpp"
#include "io/hdf5_handle.hpp"
#include "io/parallel_checkpoint.hpp"
#include "io/tensor_slice.hpp"

namespace trident {

inline constexpr const char* kChecksumAttribute = "checksum";

// Agreement: every phase ends with an all-reduce of "did this rank fail?", so all ranks leave a
// phase together, and all throw the same exception.
enum class FailureKind : int { caller = 1, checkpoint = 2 };

struct Failure {
  FailureKind kind;
  std::string message;
  bool names_os_reason = false;  // preferred: a collective write fails on every rank, the OS tells one
};

// A CheckpointError whose message ends with the OS's reason (errno) for the failure.
struct OsFailure : CheckpointError {
  using CheckpointError::CheckpointError;
};

// Collective: if any rank of `comm` reports a failure, every rank throws the same one: that of the
// lowest failing rank that names the OS's reason, else that of the lowest failing rank.
void agree(MPI_Comm comm, const std::optional<Failure>& mine);

// Runs `phase` on this rank, then agrees (see agree). A std::invalid_argument is the caller's
// mistake; any other exception is the checkpoint's.
template <class Phase>
void collectively(MPI_Comm comm, Phase&& phase) {
  std::optional<Failure> failure;
  try {
    phase();
  } catch (const std::invalid_argument& e) {
    failure = Failure{FailureKind::caller, e.what()};
  } catch (const OsFailure& e) {
    failure = Failure{FailureKind::checkpoint, e.what(), true};
  } catch (const std::exception& e) {
    failure = Failure{FailureKind::checkpoint, e.what()};
  }
  agree(comm, failure);
}

// Runs a phase that writes to the file system. HDF5 and MPI-IO report a failed write as "file write
// failed"; the OS's reason (no space left, I/O error, permission) is left in errno by the call
// that failed, and is added to the message.
template <class Phase>
void with_os_reason(Phase&& phase) {
  errno = 0;
  try {
    phase();
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    const int reason = errno;
    if (reason == 0) throw;
    throw OsFailure(std::string(e.what()) + " (" + std::strerror(reason) + ")");
  }
}

// Collective: throws std::invalid_argument (on all ranks alike) when the ranks disagree on the
// tensors' paths and global shapes or on the attributes: creating datasets and attributes is collective.
void check_same_description(MPI_Comm comm, const std::vector<TensorSlice>& tensors, const Attributes& attributes);


// Collective: throws std::invalid_argument when the elements of the included boxes (all boxes, or
// those of count_for_checksum) do not add up to every tensor's size over the ranks.
void check_coverage(MPI_Comm comm, const std::vector<TensorSlice>& tensors, const std::vector<bool>& included,
                    const std::string& what);


// Collective: the checksum of every tensor over the ranks (each rank's included boxes).
std::vector<std::uint64_t> summed_checksums(MPI_Comm comm, const std::vector<TensorSlice>& tensors,
                                            const std::vector<bool>& included);
// Collective: each tensor's checksum over the ranks, from every rank's checksums of its own boxes.
std::vector<std::uint64_t> summed_checksums(MPI_Comm comm, std::vector<std::uint64_t> sums);

// File access through MPI-IO on `comm`, metadata read and written collectively (one rank reads
// and broadcasts instead of every rank hitting the file system for each object header).
Hdf5Handle mpio_file_access(MPI_Comm comm, const std::string& file);

// Selects in `space` the union of the boxes, each starting at (box.*start); nothing when they are
// all empty. The rank still takes part in the collective transfer with an empty selection.
void select_boxes(hid_t space, const std::vector<SliceBox>& boxes, std::vector<std::int64_t> SliceBox::*start,
                  const std::string& file);


// Everything about the slices that each rank can check alone, before any collective HDF5 call
// (a rank that failed inside one would leave the others waiting): validate_slice, and that this
// rank's boxes do not overlap (their union would be smaller than their sum, which fools the
// element-count checks). Throws std::invalid_argument.
void validate_locally(const std::vector<TensorSlice>& tensors);


// An upper bound of the file's size (checkpoint_file_bound): what check_disk_space asks for.
std::int64_t planned_file_bytes(const std::vector<TensorSlice>& tensors, const Attributes& attributes);


// After a write failed on some rank (all ranks are here): rank 0 frees the disk space at once,
// then every rank tries to close the file. Parallel HDF5 may not manage that when the failed
// writes left the ranks' metadata caches apart: the watchdog names the wait and ends the job.
void abandon_file(MPI_Comm comm, Hdf5Handle& file, const std::string& tmp_path);

// Creates the float32 dataset slice.path of slice.global_shape in `file` (collective), with the
// groups above it; its contiguous storage is not filled (every element is written), and with
// `allocate_now` it is placed in the file at once, so that H5Dget_offset can say where.
Hdf5Handle create_checkpoint_dataset(hid_t file, const TensorSlice& slice, bool allocate_now, const std::string& where);

// The uint64 kChecksumAttribute of `dataset` (collective).
void write_checksum_attribute(hid_t dataset, const TensorSlice& slice, std::uint64_t checksum,
                              const std::string& where);

}  // namespace trident
