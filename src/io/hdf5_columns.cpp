#include "io/hdf5_columns.hpp"

#include <stdexcept>

namespace trident {

Hdf5Column::Hdf5Column(hid_t group, std::string name, hid_t type, std::string file, std::int64_t chunk_rows)
    : name_(std::move(name)), file_(std::move(file)) {
  const std::string what = "dataset '" + name_ + "'";
  if (chunk_rows < 1) throw std::invalid_argument("Hdf5Column: chunk_rows must be positive for " + what);
  const hsize_t empty = 0;
  const hsize_t unlimited = H5S_UNLIMITED;
  const hsize_t chunk = static_cast<hsize_t>(chunk_rows);
  const Hdf5Handle space(checked(H5Screate_simple(1, &empty, &unlimited), file_, "create dataspace for " + what),
                         H5Sclose);
  const Hdf5Handle properties(checked(H5Pcreate(H5P_DATASET_CREATE), file_, "create properties for " + what),
                              H5Pclose);
  checked(H5Pset_chunk(properties.get(), 1, &chunk), file_, "set chunking of " + what);
  dataset_ = Hdf5Handle(checked(H5Dcreate2(group, name_.c_str(), type, space.get(), H5P_DEFAULT, properties.get(),
                                           H5P_DEFAULT),
                                file_, "create " + what),
                        H5Dclose);
}

void Hdf5Column::append_many(hid_t type, const void* values, std::int64_t count) {
  if (count < 0) throw std::invalid_argument("Hdf5Column: negative row count for dataset '" + name_ + "'");
  if (count == 0) return;  // HDF5 rejects an empty hyperslab; nothing to do anyway
  const std::string what = (count == 1 ? "row " + std::to_string(rows_)
                                       : "rows " + std::to_string(rows_) + ".." + std::to_string(rows_ + count - 1)) +
                           " of dataset '" + name_ + "'";
  const hsize_t first = static_cast<hsize_t>(rows_);
  const hsize_t rows = static_cast<hsize_t>(count);
  const hsize_t grown = first + rows;
  checked(H5Dset_extent(dataset_.get(), &grown), file_, "extend to " + what);
  const Hdf5Handle file_space(checked(H5Dget_space(dataset_.get()), file_, "get dataspace for " + what), H5Sclose);
  checked(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &first, nullptr, &rows, nullptr), file_,
          "select " + what);
  const Hdf5Handle memory_space(checked(H5Screate_simple(1, &rows, nullptr), file_, "create memory dataspace"),
                                H5Sclose);
  checked(H5Dwrite(dataset_.get(), type, memory_space.get(), file_space.get(), H5P_DEFAULT, values), file_,
          "write " + what);
  rows_ += count;
}

}  // namespace trident
