#include "io/staged_checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "io/checkpoint_files.hpp"
#include "io/checkpoint_phases.hpp"

namespace trident {

namespace {

// Datasets, each's storage placed in the file now, and the root attributes into the open `file`.
std::vector<std::int64_t> create_layout(hid_t file, const std::vector<TensorSlice>& tensors,
                                        const Attributes& attributes, const std::string& tmp_path) {
  std::vector<std::int64_t> offsets;
  for (const TensorSlice& tensor : tensors) {
    const Hdf5Handle dataset = create_checkpoint_dataset(file, tensor, true, tmp_path);
    const haddr_t offset = H5Dget_offset(dataset.get());
    if (offset == HADDR_UNDEF)
      throw CheckpointError("checkpoint '" + tmp_path + "': dataset '" + tensor.path + "' has no place in the file");
    offsets.push_back(static_cast<std::int64_t>(offset));
  }
  for (const auto& [name, value] : attributes) write_attribute(file, name, value, tmp_path);
  checked(H5Fflush(file, H5F_SCOPE_GLOBAL), tmp_path, "flush");
  return offsets;
}

// An open file descriptor, closed when it goes away (a failure has been reported by then).
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::runtime_error os_failure(const std::string& what) {
  return std::runtime_error(what + " (" + std::strerror(errno) + ")");
}

void write_fully(int fd, const char* bytes, std::int64_t size, std::int64_t offset, const std::string& what) {
  while (size > 0) {
    const ssize_t done = ::pwrite(fd, bytes, static_cast<std::size_t>(size), static_cast<off_t>(offset));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) throw os_failure(what);
    bytes += done;
    size -= done;
    offset += done;
  }
}

// This rank's boxes of one dataset; rows that follow each other in the file and in memory (row
// blocks) go in one call.
std::int64_t write_tensor_data(int fd, const TensorSlice& tensor, std::int64_t data_offset, const std::string& what) {
  constexpr std::int64_t kFloat = sizeof(float);
  std::int64_t run_global = 0, run_local = 0, run_length = 0, written = 0;
  const auto flush = [&] {
    if (run_length == 0) return;
    write_fully(fd, reinterpret_cast<const char*>(tensor.data + run_local), run_length * kFloat,
                data_offset + run_global * kFloat, what);
    written += run_length * kFloat;
    run_length = 0;
  };
  for_each_row(tensor, [&](std::uint64_t global, std::uint64_t local, std::int64_t length) {
    const auto g = static_cast<std::int64_t>(global), l = static_cast<std::int64_t>(local);
    if (run_length > 0 && g == run_global + run_length && l == run_local + run_length) {
      run_length += length;
      return;
    }
    flush();
    run_global = g;
    run_local = l;
    run_length = length;
  });
  flush();
  return written;
}

std::int64_t elements_held(const std::vector<TensorSlice>& tensors) {
  std::int64_t elements = 0;
  for (const TensorSlice& tensor : tensors) elements += slice_elements(tensor);
  return elements;
}

}  // namespace

StagedCheckpoint create_staged_checkpoint(MPI_Comm comm, const std::string& dir, int step, int keep,
                                          const std::vector<TensorSlice>& tensors, const Attributes& attributes) {
  silence_hdf5_error_printing();
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  StagedCheckpoint staged;
  staged.dir = dir;
  staged.final_path = (std::filesystem::path(dir) / checkpoint_file_name(step)).string();
  staged.tmp_path = staged.final_path + kTmpSuffix;
  staged.keep = keep;
  staged.planned_bytes = planned_file_bytes(tensors, attributes);
  staged.tensors = tensors;

  collectively(comm, [&] { validate_locally(tensors); });
  collectively(comm, [&] {
    check_same_description(comm, tensors, attributes);
    check_coverage(comm, tensors, std::vector<bool>(tensors.size(), true), "boxes");
    if (rank == 0) {
      std::filesystem::create_directories(dir);
      check_disk_space(staged.tmp_path, staged.planned_bytes);
    }
  });
  Hdf5Handle file;
  try {
    collectively(comm, [&] {
      with_os_reason([&] {
        const Hdf5Handle access = mpio_file_access(comm, staged.tmp_path);
        file = Hdf5Handle(checked(H5Fcreate(staged.tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()),
                                  staged.tmp_path, "create file"),
                          H5Fclose);
      });
    });
    collectively(comm, [&] {
      with_os_reason([&] { staged.data_offsets = create_layout(file.get(), tensors, attributes, staged.tmp_path); });
    });
  } catch (const CheckpointError& error) {
    abandon_file(comm, file, staged.tmp_path);
    throw CheckpointError(std::string(error.what()) + " (" + disk_space_note(dir, staged.planned_bytes) + ")");
  }
  file = Hdf5Handle();  // closes the file (collective): its size now covers every dataset's storage
  return staged;
}

StagedWrite write_staged_data(const StagedCheckpoint& checkpoint, double pause_s) {
  StagedWrite result;
  result.checksums.assign(checkpoint.tensors.size(), 0);
  if (elements_held(checkpoint.tensors) == 0) return result;
  const std::string where = "checkpoint '" + checkpoint.tmp_path + "'";
  try {
    Descriptor file(::open(checkpoint.tmp_path.c_str(), O_WRONLY | O_CLOEXEC));
    if (file.get() < 0) throw os_failure(where + ": cannot open for the background write");
    for (std::size_t i = 0; i < checkpoint.tensors.size(); ++i) {
      const TensorSlice& tensor = checkpoint.tensors[i];
      result.bytes += write_tensor_data(file.get(), tensor, checkpoint.data_offsets[i],
                                        where + ": write of dataset '" + tensor.path + "' failed");
      result.checksums[i] = slice_checksum(tensor);
      if (i == 0 && pause_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
    }
    if (::fsync(file.get()) != 0) throw os_failure(where + ": flush to disk failed");
    if (::close(file.release()) != 0) throw os_failure(where + ": close failed");
  } catch (const std::exception& error) {
    result.failure = error.what();
  }
  return result;
}

std::string commit_staged_checkpoint(MPI_Comm comm, const StagedCheckpoint& checkpoint, const StagedWrite& written) {
  silence_hdf5_error_printing();
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string& tmp_path = checkpoint.tmp_path;
  Hdf5Handle file;
  try {
    collectively(comm, [&] {
      if (!written.failure.empty()) throw OsFailure(written.failure);
    });
    const std::vector<std::uint64_t> sums = summed_checksums(comm, written.checksums);
    collectively(comm, [&] {
      with_os_reason([&] {
        const Hdf5Handle access = mpio_file_access(comm, tmp_path);
        file = Hdf5Handle(checked(H5Fopen(tmp_path.c_str(), H5F_ACC_RDWR, access.get()), tmp_path, "reopen file"),
                          H5Fclose);
        for (std::size_t i = 0; i < sums.size(); ++i) {
          const TensorSlice& tensor = checkpoint.tensors[i];
          const Hdf5Handle dataset(
              checked(H5Dopen2(file.get(), tensor.path.c_str(), H5P_DEFAULT), tmp_path, "open " + tensor.path),
              H5Dclose);
          write_checksum_attribute(dataset.get(), tensor, sums[i], tmp_path);
        }
        checked(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), tmp_path, "flush");
      });
    });
  } catch (const CheckpointError& error) {
    abandon_file(comm, file, tmp_path);
    throw CheckpointError(std::string(error.what()) + " (" + disk_space_note(checkpoint.dir, checkpoint.planned_bytes) +
                          ")");
  }
  file = Hdf5Handle();
  MPI_Barrier(comm);
  collectively(comm, [&] {
    if (rank == 0) commit_checkpoint(tmp_path, checkpoint.final_path, checkpoint.keep);
  });
  return checkpoint.final_path;
}

}  // namespace trident
