// A memory-mapped file of named tensors stored raw (little-endian, row-major, one contiguous byte
// range each): a safetensors file or a torch.save archive, whose parsers (safetensors.hpp,
// torch_file.hpp) fill the table. A rank pays only for the pages of the slices it reads, and each
// file is checked whole on opening, so a bad file fails before any tensor is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/mapped_file.hpp"
#include "io/tensor_slice.hpp"

namespace trident {

struct StoredTensor {
  std::string dtype;  // safetensors' spelling: "F32", "BF16", "F16", "I64", ...
  std::vector<std::int64_t> shape;
  std::size_t begin = 0, end = 0;  // absolute file offsets of the data
};

// Bytes per element of safetensors' fixed-width dtypes; 0 for another.
std::size_t dtype_bytes(const std::string& dtype);

class TensorFile {
 public:
  virtual ~TensorFile() = default;
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }

  // Copies the boxes of `slice` from tensor `name` into slice.data, as float32 (BF16 and F16
  // widened exactly). Throws InputError naming the file and the tensor when it is absent, of
  // another dtype, or of another shape than slice.global_shape.
  void read(const std::string& name, const TensorSlice& slice) const;

 protected:
  explicit TensorFile(const std::string& path);  // maps the file (InputError naming it when it cannot)
  const unsigned char* bytes() const { return file_->data(); }
  std::size_t size() const { return file_->size(); }

  std::map<std::string, StoredTensor> tensors_;

 private:
  std::unique_ptr<MappedFile> file_;
};

}  // namespace trident
