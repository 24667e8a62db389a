#include "io/parallel_checkpoint.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "io/checkpoint_phases.hpp"

namespace trident {

namespace fs = std::filesystem;

namespace {

Hdf5Handle collective_transfer(const std::string& file) {
  Hdf5Handle dxpl(checked(H5Pcreate(H5P_DATASET_XFER), file, "create transfer list"), H5Pclose);
  checked(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE), file, "collective transfer");
  return dxpl;
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

// HDF5 refuses a null buffer even for an empty selection.
float* buffer_of(const TensorSlice& slice) {
  static float unused;
  return slice.data != nullptr ? slice.data : &unused;
}

void write_tensor(hid_t file, const TensorSlice& slice, std::uint64_t checksum, const std::string& where) {
  const Hdf5Handle dataset = create_checkpoint_dataset(file, slice, false, where);
  const Selections selections = select(dataset.get(), slice, where);
  checked(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, selections.memory_space.get(), selections.file_space.get(),
                   collective_transfer(where).get(), buffer_of(slice)),
          where, "write dataset " + slice.path);
  write_checksum_attribute(dataset.get(), slice, checksum, where);
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
