// One Hugging Face safetensors file (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw row-major data. Read through a memory map, so a rank pays only for the pages of the
// slices it reads, and checked whole on opening, so a bad file fails before any tensor is read.
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

struct SafetensorsTensor {
  std::string dtype;  // as the file spells it: "F32", "BF16", "F16", "I64", ...
  std::vector<std::int64_t> shape;
  std::size_t begin = 0, end = 0;  // absolute file offsets of the data
};

class SafetensorsFile {
 public:
  // Throws InputError naming the file (and the tensor where there is one) when it is too short,
  // its header is not a JSON object of well-formed entries, or an entry's bytes are out of the file
  // or disagree with its shape and dtype.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }

  // Copies the boxes of `slice` from tensor `name` into slice.data, as float32 (BF16 and F16
  // widened exactly). Throws InputError naming the file and the tensor when it is absent, of
  // another dtype, or of another shape than slice.global_shape.
  void read(const std::string& name, const TensorSlice& slice) const;

 private:
  std::unique_ptr<MappedFile> file_;  // a pointer: MappedFile does not move, SafetensorsFile does
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace trident
