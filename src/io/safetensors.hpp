// One Hugging Face safetensors file (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw row-major data.
#pragma once

#include <string>

#include "io/tensor_file.hpp"

namespace trident {

class SafetensorsFile : public TensorFile {
 public:
  // Throws InputError naming the file (and the tensor where there is one) when it is too short,
  // its header is not a JSON object of well-formed entries, or an entry's bytes are out of the file
  // or disagree with its shape and dtype.
  explicit SafetensorsFile(const std::string& path);
};

}  // namespace trident
