#include "io/parallel_checkpoint.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include "common/watchdog.hpp"
#include "io/hdf5_handle.hpp"

namespace trident {

namespace fs = std::filesystem;

namespace {

constexpr const char* kChecksumAttribute = "checksum";

// ---------------------------------------------------------------------------------------------
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
void agree(MPI_Comm comm, const std::optional<Failure>& mine) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int first = mine ? (mine->names_os_reason ? rank : size + rank) : 2 * size;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == 2 * size) return;
  first %= size;
  int header[2] = {mine ? static_cast<int>(mine->kind) : 0, mine ? static_cast<int>(mine->message.size()) : 0};
  MPI_Bcast(header, 2, MPI_INT, first, comm);
  std::string message = rank == first ? mine->message : std::string(static_cast<std::size_t>(header[1]), '\0');
  MPI_Bcast(message.data(), header[1], MPI_CHAR, first, comm);
  if (static_cast<FailureKind>(header[0]) == FailureKind::caller) throw std::invalid_argument(message);
  throw CheckpointError(message);
}

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

// ---------------------------------------------------------------------------------------------
// Checks that need every rank's view; called on all ranks after each slice was validated locally.

// FNV-1a over the bytes of everything that must be identical on all ranks.
class Fingerprint {
 public:
  void add(const void* bytes, std::size_t size) {
    const auto* data = static_cast<const unsigned char*>(bytes);
    for (std::size_t i = 0; i < size; ++i) hash_ = (hash_ ^ data[i]) * 0x100000001B3ull;
  }
  void add(const std::string& text) {
    add_value(text.size());
    add(text.data(), text.size());
  }
  template <class T>
  void add_value(const T& value) {
    add(&value, sizeof value);
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xCBF29CE484222325ull;
};

std::uint64_t fingerprint(const std::vector<TensorSlice>& tensors, const Attributes& attributes) {
  Fingerprint f;
  f.add_value(tensors.size());
  for (const TensorSlice& tensor : tensors) {
    f.add(tensor.path);
    f.add_value(tensor.global_shape.size());
    for (std::int64_t extent : tensor.global_shape) f.add_value(extent);
  }
  f.add_value(attributes.size());
  for (const auto& [name, value] : attributes) {
    f.add(name);
    f.add_value(value.index());
    std::visit([&](const auto& v) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>)
        f.add(v);
      else
        f.add_value(v);
    }, value);
  }
  return f.value();
}

// Collective: throws std::invalid_argument (on all ranks alike) when the ranks disagree on the
// tensors' paths and global shapes or on the attributes: creating datasets and attributes is collective.
void check_same_description(MPI_Comm comm, const std::vector<TensorSlice>& tensors, const Attributes& attributes) {
  const std::uint64_t mine = fingerprint(tensors, attributes);
  std::uint64_t min_and_not_max[2] = {mine, ~mine};  // min(~x) = ~max(x): both extremes in one all-reduce
  MPI_Allreduce(MPI_IN_PLACE, min_and_not_max, 2, MPI_UINT64_T, MPI_MIN, comm);
  if (min_and_not_max[0] != ~min_and_not_max[1])
    throw std::invalid_argument("checkpoint: the ranks pass different tensor paths, global shapes or attributes");
}

// Collective: throws std::invalid_argument when the elements of the included boxes (all boxes, or
// those of count_for_checksum) do not add up to every tensor's size over the ranks.
void check_coverage(MPI_Comm comm, const std::vector<TensorSlice>& tensors, const std::vector<bool>& included,
                    const std::string& what) {
  std::vector<std::int64_t> counts(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) counts[i] = included[i] ? slice_elements(tensors[i]) : 0;
  MPI_Allreduce(MPI_IN_PLACE, counts.data(), static_cast<int>(counts.size()), MPI_INT64_T, MPI_SUM, comm);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (counts[i] != element_count(tensors[i].global_shape))
      throw std::invalid_argument("checkpoint tensor '" + tensors[i].path + "': the ranks' " + what + " hold " +
                                  std::to_string(counts[i]) + " elements, the tensor " +
                                  std::to_string(element_count(tensors[i].global_shape)));
}

// Collective: the checksum of every tensor over the ranks (each rank's included boxes).
std::vector<std::uint64_t> summed_checksums(MPI_Comm comm, const std::vector<TensorSlice>& tensors,
                                            const std::vector<bool>& included) {
  std::vector<std::uint64_t> sums(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) sums[i] = included[i] ? slice_checksum(tensors[i]) : 0;
  // MPI_SUM on unsigned integers wraps: the sum mod 2^64 whatever the reduction order.
  MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_UINT64_T, MPI_SUM, comm);
  return sums;
}

// ---------------------------------------------------------------------------------------------
// HDF5 with MPI-IO.

// File access through MPI-IO on `comm`, metadata read and written collectively (one rank reads
// and broadcasts instead of every rank hitting the file system for each object header).
Hdf5Handle mpio_file_access(MPI_Comm comm, const std::string& file) {
  Hdf5Handle fapl(checked(H5Pcreate(H5P_FILE_ACCESS), file, "create file access list"), H5Pclose);
  checked(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), file, "select MPI-IO");
  checked(H5Pset_all_coll_metadata_ops(fapl.get(), true), file, "collective metadata reads");
  checked(H5Pset_coll_metadata_write(fapl.get(), true), file, "collective metadata writes");
  return fapl;
}

Hdf5Handle collective_transfer(const std::string& file) {
  Hdf5Handle dxpl(checked(H5Pcreate(H5P_DATASET_XFER), file, "create transfer list"), H5Pclose);
  checked(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE), file, "collective transfer");
  return dxpl;
}

// Selects in `space` the union of the boxes, each starting at (box.*start); nothing when they are
// all empty. The rank still takes part in the collective transfer with an empty selection.
void select_boxes(hid_t space, const std::vector<SliceBox>& boxes, std::vector<std::int64_t> SliceBox::*start,
                  const std::string& file) {
  checked(H5Sselect_none(space), file, "clear selection");
  H5S_seloper_t operation = H5S_SELECT_SET;
  for (const SliceBox& box : boxes) {
    if (box_elements(box) == 0) continue;
    const std::vector<hsize_t> offset((box.*start).begin(), (box.*start).end());
    const std::vector<hsize_t> count(box.count.begin(), box.count.end());
    checked(H5Sselect_hyperslab(space, operation, offset.data(), nullptr, count.data(), nullptr), file,
            "select hyperslab");
    operation = H5S_SELECT_OR;
  }
}

// The file and memory selections of this rank's boxes in `dataset`.
struct Selections {
  Hdf5Handle file_space, memory_space;
};

Selections select(hid_t dataset, const TensorSlice& slice, const std::string& file) {
  Hdf5Handle file_space(checked(H5Dget_space(dataset), file, "dataspace of " + slice.path), H5Sclose);
  select_boxes(file_space.get(), slice.boxes, &SliceBox::global_start, file);
  // A rank that holds nothing may describe its local array as empty: give it a one-element space.
  const bool holds_nothing = slice_elements(slice) == 0;
  std::vector<hsize_t> local{1};
  if (!holds_nothing) local.assign(slice.local_shape.begin(), slice.local_shape.end());
  Hdf5Handle memory_space(checked(H5Screate_simple(static_cast<int>(local.size()), local.data(), nullptr), file,
                                  "local dataspace of " + slice.path),
                          H5Sclose);
  select_boxes(memory_space.get(), slice.boxes, &SliceBox::local_start, file);
  return {std::move(file_space), std::move(memory_space)};
}

// Everything about the slices that each rank can check alone, before any collective HDF5 call
// (a rank that failed inside one would leave the others waiting): validate_slice, and that this
// rank's boxes do not overlap (their union would be smaller than their sum, which fools the
// element-count checks). Throws std::invalid_argument.
void validate_locally(const std::vector<TensorSlice>& tensors) {
  for (const TensorSlice& slice : tensors) {
    validate_slice(slice);
    if (slice.boxes.size() < 2) continue;
    const std::vector<hsize_t> dims(slice.global_shape.begin(), slice.global_shape.end());
    const Hdf5Handle space(checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), slice.path,
                                   "dataspace"),
                           H5Sclose);
    select_boxes(space.get(), slice.boxes, &SliceBox::global_start, slice.path);
    if (H5Sget_select_npoints(space.get()) != slice_elements(slice))
      throw std::invalid_argument("checkpoint tensor '" + slice.path + "': this rank's boxes overlap");
  }
}

// HDF5 refuses a null buffer even for an empty selection.
float* buffer_of(const TensorSlice& slice) {
  static float unused;
  return slice.data != nullptr ? slice.data : &unused;
}

void write_tensor(hid_t file, const TensorSlice& slice, std::uint64_t checksum, const std::string& where) {
  const std::vector<hsize_t> dims(slice.global_shape.begin(), slice.global_shape.end());
  const Hdf5Handle space(checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), where,
                                 "dataspace of " + slice.path),
                         H5Sclose);
  const Hdf5Handle links(checked(H5Pcreate(H5P_LINK_CREATE), where, "link creation list"), H5Pclose);
  checked(H5Pset_create_intermediate_group(links.get(), 1), where, "intermediate groups");
  // Every element is written: skip filling the dataset first.
  const Hdf5Handle creation(checked(H5Pcreate(H5P_DATASET_CREATE), where, "dataset creation list"), H5Pclose);
  checked(H5Pset_fill_time(creation.get(), H5D_FILL_TIME_NEVER), where, "fill time");
  const Hdf5Handle dataset(checked(H5Dcreate2(file, slice.path.c_str(), H5T_IEEE_F32LE, space.get(), links.get(),
                                              creation.get(), H5P_DEFAULT),
                                   where, "create dataset " + slice.path),
                           H5Dclose);
  const Selections selections = select(dataset.get(), slice, where);
  checked(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, selections.memory_space.get(), selections.file_space.get(),
                   collective_transfer(where).get(), buffer_of(slice)),
          where, "write dataset " + slice.path);

  const Hdf5Handle scalar(checked(H5Screate(H5S_SCALAR), where, "scalar dataspace"), H5Sclose);
  const Hdf5Handle attribute(checked(H5Acreate2(dataset.get(), kChecksumAttribute, H5T_STD_U64LE, scalar.get(),
                                                H5P_DEFAULT, H5P_DEFAULT),
                                     where, "create checksum of " + slice.path),
                             H5Aclose);
  checked(H5Awrite(attribute.get(), H5T_NATIVE_UINT64, &checksum), where, "write checksum of " + slice.path);
}

// The object at `path` if it is a dataset; CheckpointError "missing" otherwise. Checks each link of
// the path in turn: H5Lexists fails, rather than answers no, below a missing group.
Hdf5Handle open_dataset(hid_t file, const TensorSlice& slice, const std::string& where) {
  const auto missing = [&]() {
    return CheckpointError("checkpoint '" + where + "': dataset '" + slice.path + "' is missing");
  };
  for (std::size_t end = slice.path.find('/', 1);; end = slice.path.find('/', end + 1)) {
    const std::string prefix = slice.path.substr(0, end);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      throw missing();
    }
    if (end == std::string::npos) break;
  }
  Hdf5Handle object(checked(H5Oopen(file, slice.path.c_str(), H5P_DEFAULT), where, "open " + slice.path), H5Oclose);
  if (H5Iget_type(object.get()) != H5I_DATASET) throw missing();
  return object;
}

// Throws CheckpointError unless `dataset` is float32 of slice.global_shape.
void check_dataset(hid_t dataset, const TensorSlice& slice, const std::string& where) {
  const std::string name = "checkpoint '" + where + "': dataset '" + slice.path + "'";
  const Hdf5Handle type(checked(H5Dget_type(dataset), where, "type of " + slice.path), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != sizeof(float))
    throw CheckpointError(name + " is not float32");
  const Hdf5Handle space(checked(H5Dget_space(dataset), where, "dataspace of " + slice.path), H5Sclose);
  const int rank = checked(H5Sget_simple_extent_ndims(space.get()), where, "rank of " + slice.path);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  checked(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), where, "shape of " + slice.path);
  const std::vector<std::int64_t> shape(dims.begin(), dims.end());
  if (shape != slice.global_shape)
    throw CheckpointError(name + " has shape " + format_shape(shape) + " but expected " +
                          format_shape(slice.global_shape));
}

std::uint64_t read_checksum(hid_t dataset, const TensorSlice& slice, const std::string& where) {
  if (H5Aexists(dataset, kChecksumAttribute) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw CheckpointError("checkpoint '" + where + "': dataset '" + slice.path + "' has no checksum attribute");
  }
  const Hdf5Handle attribute(checked(H5Aopen(dataset, kChecksumAttribute, H5P_DEFAULT), where,
                                     "open checksum of " + slice.path),
                             H5Aclose);
  std::uint64_t checksum = 0;
  checked(H5Aread(attribute.get(), H5T_NATIVE_UINT64, &checksum), where, "read checksum of " + slice.path);
  return checksum;
}

std::string hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

// An upper bound of the file's size (checkpoint_file_bound): what check_disk_space asks for.
std::int64_t planned_file_bytes(const std::vector<TensorSlice>& tensors, const Attributes& attributes) {
  std::int64_t data = 0, attribute_bytes = 0;
  for (const TensorSlice& tensor : tensors)
    data += element_count(tensor.global_shape) * static_cast<std::int64_t>(sizeof(float));
  for (const auto& [name, value] : attributes) {
    const auto* text = std::get_if<std::string>(&value);
    attribute_bytes += static_cast<std::int64_t>(name.size() + (text ? text->size() : sizeof(double)));
  }
  return checkpoint_file_bound(data, static_cast<std::int64_t>(tensors.size()), attribute_bytes);
}

// Collective: the datasets, their checksums and the root attributes into the open `file`, flushed
// to disk (MPI_File_sync) so that a rename can make it a checkpoint once closed.
void write_contents(MPI_Comm comm, hid_t file, const std::string& tmp_path, const std::vector<TensorSlice>& tensors,
                    const std::vector<std::uint64_t>& checksums, const Attributes& attributes) {
  for (std::size_t i = 0; i < tensors.size(); ++i)
    collectively(comm, [&] { with_os_reason([&] { write_tensor(file, tensors[i], checksums[i], tmp_path); }); });
  collectively(comm, [&] {
    with_os_reason([&] {
      for (const auto& [name, value] : attributes) write_attribute(file, name, value, tmp_path);
      checked(H5Fflush(file, H5F_SCOPE_GLOBAL), tmp_path, "flush");
    });
  });
}

// After a write failed on some rank (all ranks are here): rank 0 frees the disk space at once,
// then every rank tries to close the file. Parallel HDF5 may not manage that when the failed
// writes left the ranks' metadata caches apart: the watchdog names the wait and ends the job.
void abandon_file(MPI_Comm comm, Hdf5Handle& file, const std::string& tmp_path) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (rank == 0) {
    ::truncate(tmp_path.c_str(), 0);  // frees the blocks even while the file is still open
    std::error_code ignored;
    fs::remove(tmp_path, ignored);
  }
  const std::string writers = "the checkpoint's writers (" + std::to_string(size) + " ranks)";
  const BlockedIn watched("closing of the checkpoint file after a failed write", writers);
  file = Hdf5Handle();
}

}  // namespace

std::string write_checkpoint_collective(MPI_Comm comm, const std::string& dir, int step, int keep,
                                        const std::vector<TensorSlice>& tensors, const Attributes& attributes) {
  silence_hdf5_error_printing();
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string final_path = (fs::path(dir) / checkpoint_file_name(step)).string();
  const std::string tmp_path = final_path + kTmpSuffix;
  const std::int64_t planned_bytes = planned_file_bytes(tensors, attributes);

  collectively(comm, [&] { validate_locally(tensors); });
  std::vector<std::uint64_t> checksums;
  collectively(comm, [&] {
    check_same_description(comm, tensors, attributes);
    check_coverage(comm, tensors, std::vector<bool>(tensors.size(), true), "boxes");
    checksums = summed_checksums(comm, tensors, std::vector<bool>(tensors.size(), true));
    if (rank == 0) {
      fs::create_directories(dir);
      check_disk_space(tmp_path, planned_bytes);
    }
  });

  Hdf5Handle file;
  collectively(comm, [&] {
    with_os_reason([&] {
      const Hdf5Handle access = mpio_file_access(comm, tmp_path);
      file = Hdf5Handle(checked(H5Fcreate(tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), tmp_path,
                                "create file"),
                        H5Fclose);
    });
  });
  try {
    write_contents(comm, file.get(), tmp_path, tensors, checksums, attributes);
  } catch (const CheckpointError& error) {
    abandon_file(comm, file, tmp_path);
    throw CheckpointError(std::string(error.what()) + " (" + disk_space_note(dir, planned_bytes) + ")");
  }
  file = Hdf5Handle();  // closes the file (collective)
  MPI_Barrier(comm);
  collectively(comm, [&] {
    if (rank == 0) commit_checkpoint(tmp_path, final_path, keep);
  });
  return final_path;
}

Attributes read_checkpoint_collective(MPI_Comm comm, const std::string& path, const std::vector<TensorSlice>& tensors,
                                      const std::vector<bool>& count_for_checksum) {
  silence_hdf5_error_printing();
  collectively(comm, [&] {
    if (count_for_checksum.size() != tensors.size())
      throw std::invalid_argument("checkpoint: count_for_checksum has " + std::to_string(count_for_checksum.size()) +
                                  " entries for " + std::to_string(tensors.size()) + " tensors");
    validate_locally(tensors);
  });
  collectively(comm, [&] {
    check_same_description(comm, tensors, {});
    check_coverage(comm, tensors, count_for_checksum, "boxes counted for the checksum");
  });

  Hdf5Handle file;
  collectively(comm, [&] {
    const Hdf5Handle access = mpio_file_access(comm, path);
    file = Hdf5Handle(checked(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()), path, "open checkpoint"), H5Fclose);
  });
  std::vector<Hdf5Handle> datasets(tensors.size());
  collectively(comm, [&] {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      datasets[i] = open_dataset(file.get(), tensors[i], path);
      check_dataset(datasets[i].get(), tensors[i], path);
    }
  });
  for (std::size_t i = 0; i < tensors.size(); ++i)
    collectively(comm, [&] {
      const Selections selections = select(datasets[i].get(), tensors[i], path);
      checked(H5Dread(datasets[i].get(), H5T_NATIVE_FLOAT, selections.memory_space.get(), selections.file_space.get(),
                      collective_transfer(path).get(), buffer_of(tensors[i])),
              path, "read dataset " + tensors[i].path);
    });

  std::vector<std::uint64_t> sums;
  Attributes attributes;
  collectively(comm, [&] {
    sums = summed_checksums(comm, tensors, count_for_checksum);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::uint64_t stored = read_checksum(datasets[i].get(), tensors[i], path);
      if (stored != sums[i])
        throw CheckpointError("checkpoint '" + path + "': dataset '" + tensors[i].path +
                              "' fails its checksum (stored " + hex(stored) + ", data " + hex(sums[i]) + ")");
    }
    attributes = read_attributes(file.get(), path);
  });
  return attributes;
}

}  // namespace trident
