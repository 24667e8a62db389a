// A state dict written by torch.save (PyTorch >= 1.6, Hugging Face's pytorch_model.bin): a zip
// archive, stored uncompressed, holding <archive>/data.pkl (the dict pickled at protocol 2, each
// tensor a torch._utils._rebuild_tensor_v2 call on a persistent storage id) and each storage's bytes
// in <archive>/data/<key>. Read without Python: the zip's central directory (zip64 too) gives each
// storage's place in the memory-mapped file, and a pickle machine that knows only what torch.save
// writes turns data.pkl into the tensors' dtypes, shapes and byte ranges. Nothing in the pickle is
// executed; a global other than the tensor and dict rebuilders is kept as an opaque value.
#pragma once

#include <string>

#include "io/tensor_file.hpp"

namespace trident {

class TorchFile : public TensorFile {
 public:
  // Throws InputError naming the file (and the tensor where there is one) when it is not a zip of
  // stored entries, lacks data.pkl or a storage the pickle names, the pickle uses what torch.save
  // does not write, or a tensor is not contiguous, of a storage type other than float, bfloat16 or
  // half, or runs past its storage. The legacy (pre-1.6, not zip) format is refused by name.
  explicit TorchFile(const std::string& path);
};

}  // namespace trident
