#include "io/hdf5_columns.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace trident {

Hdf5Column::Hdf5Column(hid_t group, std::string name, hid_t type, std::string file, std::int64_t chunk_rows,
                       std::int64_t width)
    : name_(std::move(name)), file_(std::move(file)), width_(width) {
  const std::string what = "dataset '" + name_ + "'";
  if (chunk_rows < 1) throw std::invalid_argument("Hdf5Column: chunk_rows must be positive for " + what);
  if (width < 0) throw std::invalid_argument("Hdf5Column: negative width for " + what);
  const int rank = width == 0 ? 1 : 2;
  const hsize_t empty[2] = {0, static_cast<hsize_t>(width)};
  const hsize_t maximum[2] = {H5S_UNLIMITED, static_cast<hsize_t>(width)};
  const hsize_t chunk[2] = {static_cast<hsize_t>(chunk_rows), static_cast<hsize_t>(width)};
  const Hdf5Handle space(checked(H5Screate_simple(rank, empty, maximum), file_, "create dataspace for " + what),
                         H5Sclose);
  const Hdf5Handle properties(checked(H5Pcreate(H5P_DATASET_CREATE), file_, "create properties for " + what),
                              H5Pclose);
  checked(H5Pset_chunk(properties.get(), rank, chunk), file_, "set chunking of " + what);
  dataset_ = Hdf5Handle(checked(H5Dcreate2(group, name_.c_str(), type, space.get(), H5P_DEFAULT, properties.get(),
                                           H5P_DEFAULT),
                                file_, "create " + what),
                        H5Dclose);
}

Hdf5Column::Hdf5Column(OpenExisting, hid_t group, std::string name, std::string file)
    : name_(std::move(name)), file_(std::move(file)) {
  const std::string what = "dataset '" + name_ + "'";
  dataset_ = Hdf5Handle(checked(H5Dopen2(group, name_.c_str(), H5P_DEFAULT), file_, "open " + what), H5Dclose);
  const Hdf5Handle space(checked(H5Dget_space(dataset_.get()), file_, "get dataspace of " + what), H5Sclose);
  const int rank = checked(H5Sget_simple_extent_ndims(space.get()), file_, "get rank of " + what);
  if (rank != 1 && rank != 2)
    throw std::runtime_error("HDF5: " + what + " in '" + file_ + "' has " + std::to_string(rank) +
                             " dimensions; a column has 1 or 2");
  hsize_t dims[2] = {0, 0};
  hsize_t maximum[2] = {0, 0};
  checked(H5Sget_simple_extent_dims(space.get(), dims, maximum), file_, "get extent of " + what);
  if (maximum[0] != H5S_UNLIMITED)
    throw std::runtime_error("HDF5: " + what + " in '" + file_ + "' cannot grow (its first dimension is limited)");
  rows_ = static_cast<std::int64_t>(dims[0]);
  width_ = rank == 2 ? static_cast<std::int64_t>(dims[1]) : 0;
}

std::string Hdf5Column::rows_text(std::int64_t first, std::int64_t count) const {
  return (count == 1 ? "row " + std::to_string(first)
                     : "rows " + std::to_string(first) + ".." + std::to_string(first + count - 1)) +
         " of dataset '" + name_ + "'";
}

void Hdf5Column::append_many(hid_t type, const void* values, std::int64_t count) {
  if (count < 0) throw std::invalid_argument("Hdf5Column: negative row count for dataset '" + name_ + "'");
  if (count == 0) return;  // HDF5 rejects an empty hyperslab; nothing to do anyway
  const hsize_t grown[2] = {static_cast<hsize_t>(rows_ + count), static_cast<hsize_t>(width_)};
  checked(H5Dset_extent(dataset_.get(), grown), file_, "extend to " + rows_text(rows_, count));
  write_rows(rows_, count, type, values);
  rows_ += count;
}

void Hdf5Column::write_rows(std::int64_t first_row, std::int64_t count, hid_t type, const void* values) {
  const std::string what = rows_text(first_row, count);
  const int rank = width_ == 0 ? 1 : 2;
  const hsize_t first[2] = {static_cast<hsize_t>(first_row), 0};
  const hsize_t rows[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(width_)};
  const Hdf5Handle file_space(checked(H5Dget_space(dataset_.get()), file_, "get dataspace for " + what), H5Sclose);
  checked(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, first, nullptr, rows, nullptr), file_,
          "select " + what);
  const Hdf5Handle memory_space(checked(H5Screate_simple(rank, rows, nullptr), file_, "create memory dataspace"),
                                H5Sclose);
  checked(H5Dwrite(dataset_.get(), type, memory_space.get(), file_space.get(), H5P_DEFAULT, values), file_,
          "write " + what);
}

void Hdf5Column::read_all(hid_t type, void* values) const {
  if (rows_ == 0) return;  // nothing to read; HDF5 would accept it, but values may be null
  checked(H5Dread(dataset_.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), file_,
          "read " + rows_text(0, rows_));
}

void Hdf5Column::truncate(std::int64_t rows) {
  if (rows < 0 || rows > rows_)
    throw std::invalid_argument("Hdf5Column: cannot truncate dataset '" + name_ + "' of " + std::to_string(rows_) +
                                " rows to " + std::to_string(rows));
  if (rows == rows_) return;
  const hsize_t shrunk[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(width_)};
  checked(H5Dset_extent(dataset_.get(), shrunk), file_, "shrink dataset '" + name_ + "' to " + std::to_string(rows) + " rows");
  rows_ = rows;
}

void Hdf5Column::retain(const std::vector<bool>& keep) {
  if (static_cast<std::int64_t>(keep.size()) != rows_)
    throw std::invalid_argument("Hdf5Column: " + std::to_string(keep.size()) + " keep flags for dataset '" + name_ +
                                "' of " + std::to_string(rows_) + " rows");
  const auto kept = static_cast<std::int64_t>(std::count(keep.begin(), keep.end(), true));
  const auto first_dropped = std::find(keep.begin(), keep.end(), false);
  if (std::find(first_dropped, keep.end(), true) == keep.end()) {  // kept rows first: a suffix goes
    truncate(kept);
    return;
  }
  const std::string what = "dataset '" + name_ + "'";
  const Hdf5Handle type(checked(H5Dget_type(dataset_.get()), file_, "get type of " + what), H5Tclose);
  if (checked(H5Tis_variable_str(type.get()), file_, "inspect type of " + what) > 0 ||
      H5Tget_class(type.get()) == H5T_VLEN)
    throw std::runtime_error("HDF5: cannot compact " + what + " in '" + file_ + "': variable-length elements");
  const std::size_t row_bytes = H5Tget_size(type.get()) * static_cast<std::size_t>(std::max<std::int64_t>(width_, 1));
  std::vector<unsigned char> bytes(row_bytes * static_cast<std::size_t>(rows_));
  read_all(type.get(), bytes.data());  // in the stored type: no conversion, exact bytes
  std::size_t out = 0;
  for (std::size_t row = 0; row < keep.size(); ++row) {
    if (!keep[row]) continue;
    if (out != row) std::memmove(bytes.data() + out * row_bytes, bytes.data() + row * row_bytes, row_bytes);
    ++out;
  }
  write_rows(0, kept, type.get(), bytes.data());  // over the first rows, then the rest goes
  truncate(kept);
}

bool Hdf5Column::stores(hid_t type) const {
  const Hdf5Handle stored(checked(H5Dget_type(dataset_.get()), file_, "get type of dataset '" + name_ + "'"),
                          H5Tclose);
  if (H5Tget_class(stored.get()) != H5Tget_class(type) || H5Tget_size(stored.get()) != H5Tget_size(type)) return false;
  if (H5Tget_class(type) == H5T_STRING)
    return H5Tis_variable_str(stored.get()) == H5Tis_variable_str(type);
  return true;
}

}  // namespace trident
