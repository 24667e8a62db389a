#include "io/hdf5_columns.hpp"

namespace trident {

namespace {

// Elements per chunk: big enough that long runs don't fragment, small enough for tiny ones.
constexpr hsize_t kColumnChunk = 1024;

}  // namespace

Hdf5Column::Hdf5Column(hid_t group, std::string name, hid_t type, std::string file)
    : name_(std::move(name)), file_(std::move(file)) {
  const std::string what = "dataset '" + name_ + "'";
  const hsize_t empty = 0;
  const hsize_t unlimited = H5S_UNLIMITED;
  const Hdf5Handle space(checked(H5Screate_simple(1, &empty, &unlimited), file_, "create dataspace for " + what),
                         H5Sclose);
  const Hdf5Handle properties(checked(H5Pcreate(H5P_DATASET_CREATE), file_, "create properties for " + what),
                              H5Pclose);
  checked(H5Pset_chunk(properties.get(), 1, &kColumnChunk), file_, "set chunking of " + what);
  dataset_ = Hdf5Handle(checked(H5Dcreate2(group, name_.c_str(), type, space.get(), H5P_DEFAULT, properties.get(),
                                           H5P_DEFAULT),
                                file_, "create " + what),
                        H5Dclose);
}

void Hdf5Column::append(hid_t type, const void* value) {
  const std::string what = "row " + std::to_string(rows_) + " of dataset '" + name_ + "'";
  const hsize_t row = static_cast<hsize_t>(rows_);
  const hsize_t grown = row + 1;
  const hsize_t one = 1;
  checked(H5Dset_extent(dataset_.get(), &grown), file_, "extend to " + what);
  const Hdf5Handle file_space(checked(H5Dget_space(dataset_.get()), file_, "get dataspace for " + what), H5Sclose);
  checked(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &row, nullptr, &one, nullptr), file_,
          "select " + what);
  const Hdf5Handle memory_space(checked(H5Screate_simple(1, &one, nullptr), file_, "create memory dataspace"),
                                H5Sclose);
  checked(H5Dwrite(dataset_.get(), type, memory_space.get(), file_space.get(), H5P_DEFAULT, value), file_,
          "write " + what);
  ++rows_;
}

}  // namespace trident
