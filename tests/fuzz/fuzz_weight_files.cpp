// libFuzzer target: the readers of Hugging Face weight files (checkpoint.init = "hf:DIR"). The input
// is the file: a zip (starting "PK") goes to the torch.save reader (zip directory, pickle), anything
// else to the safetensors reader. A file a reader accepts has each of its float tensors read whole.
// A bad file must end in InputError; anything else (a crash, a read past the map, an overflow) is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "io/safetensors.hpp"
#include "io/torch_file.hpp"

namespace {

constexpr std::int64_t kMostElementsRead = 1 << 20;  // a header may claim more than fits in memory

void read_float_tensors(const trident::TensorFile& file) {
  for (const auto& [name, tensor] : file.tensors()) {
    trident::TensorSlice slice;
    slice.path = name;
    slice.global_shape = tensor.shape.empty() ? std::vector<std::int64_t>{1} : tensor.shape;
    const std::int64_t elements = trident::element_count(slice.global_shape);
    if (elements <= 0 || elements > kMostElementsRead) continue;
    slice.local_shape = slice.global_shape;
    std::vector<float> values(static_cast<std::size_t>(elements));
    slice.data = values.data();
    slice.boxes.push_back({std::vector<std::int64_t>(slice.global_shape.size(), 0),
                           std::vector<std::int64_t>(slice.global_shape.size(), 0), slice.global_shape});
    try {
      file.read(name, slice);
    } catch (const trident::InputError&) {  // another dtype, a 0-D shape: refused by name
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/trident_fuzz_weight_files_" + std::to_string(getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    if (size >= 2 && data[0] == 'P' && data[1] == 'K')
      read_float_tensors(trident::TorchFile(path));
    else
      read_float_tensors(trident::SafetensorsFile(path));
  } catch (const trident::InputError&) {
  }
  return 0;
}
