#include "io/checkpoint_phases.hpp"

#include <unistd.h>

#include <filesystem>
#include <type_traits>
#include <variant>

#include "common/watchdog.hpp"
#include "io/checkpoint_files.hpp"

namespace trident {

namespace {

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

}  // namespace

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
  return summed_checksums(comm, std::move(sums));
}

std::vector<std::uint64_t> summed_checksums(MPI_Comm comm, std::vector<std::uint64_t> sums) {
  // MPI_SUM on unsigned integers wraps: the sum mod 2^64 whatever the reduction order.
  MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_UINT64_T, MPI_SUM, comm);
  return sums;
}

// File access through MPI-IO on `comm`, metadata read and written collectively (one rank reads
// and broadcasts instead of every rank hitting the file system for each object header).
Hdf5Handle mpio_file_access(MPI_Comm comm, const std::string& file) {
  Hdf5Handle fapl(checked(H5Pcreate(H5P_FILE_ACCESS), file, "create file access list"), H5Pclose);
  checked(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), file, "select MPI-IO");
  checked(H5Pset_all_coll_metadata_ops(fapl.get(), true), file, "collective metadata reads");
  checked(H5Pset_coll_metadata_write(fapl.get(), true), file, "collective metadata writes");
  return fapl;
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
    std::filesystem::remove(tmp_path, ignored);
  }
  const std::string writers = "the checkpoint's writers (" + std::to_string(size) + " ranks)";
  const BlockedIn watched("closing of the checkpoint file after a failed write", writers);
  file = Hdf5Handle();
}

Hdf5Handle create_checkpoint_dataset(hid_t file, const TensorSlice& slice, bool allocate_now, const std::string& where) {
  const std::vector<hsize_t> dims(slice.global_shape.begin(), slice.global_shape.end());
  const Hdf5Handle space(checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), where,
                                 "dataspace of " + slice.path),
                         H5Sclose);
  const Hdf5Handle links(checked(H5Pcreate(H5P_LINK_CREATE), where, "link creation list"), H5Pclose);
  checked(H5Pset_create_intermediate_group(links.get(), 1), where, "intermediate groups");
  const Hdf5Handle creation(checked(H5Pcreate(H5P_DATASET_CREATE), where, "dataset creation list"), H5Pclose);
  checked(H5Pset_fill_time(creation.get(), H5D_FILL_TIME_NEVER), where, "fill time");
  if (allocate_now) checked(H5Pset_alloc_time(creation.get(), H5D_ALLOC_TIME_EARLY), where, "allocation time");
  return Hdf5Handle(checked(H5Dcreate2(file, slice.path.c_str(), H5T_IEEE_F32LE, space.get(), links.get(),
                                       creation.get(), H5P_DEFAULT),
                            where, "create dataset " + slice.path),
                    H5Dclose);
}

void write_checksum_attribute(hid_t dataset, const TensorSlice& slice, std::uint64_t checksum,
                              const std::string& where) {
  const Hdf5Handle scalar(checked(H5Screate(H5S_SCALAR), where, "scalar dataspace"), H5Sclose);
  const Hdf5Handle attribute(checked(H5Acreate2(dataset, kChecksumAttribute, H5T_STD_U64LE, scalar.get(),
                                                H5P_DEFAULT, H5P_DEFAULT),
                                     where, "create checksum of " + slice.path),
                             H5Aclose);
  checked(H5Awrite(attribute.get(), H5T_NATIVE_UINT64, &checksum), where, "write checksum of " + slice.path);
}

}  // namespace trident
