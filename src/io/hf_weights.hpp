// The weights of a Hugging Face model folder (checkpoint.init = "hf:DIR"): model.safetensors, the
// shards model.safetensors.index.json maps each tensor to, or the same with pytorch_model.bin
// (torch.save archives), in from_pretrained's order of preference. All files are opened and checked
// up front, so a broken folder fails before the model is built rather than half-way through it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/tensor_file.hpp"
#include "io/tensor_slice.hpp"

namespace trident {

class HfWeights {
 public:
  // Throws InputError naming DIR and what was looked for when it holds no weights, naming the index
  // and the shard when a shard is missing, and naming both when a tensor the index maps is absent
  // from its shard.
  explicit HfWeights(const std::string& dir);

  bool contains(const std::string& name) const { return shard_of_.contains(name); }
  std::vector<std::string> names() const;  // sorted
  // Both throw InputError naming DIR and the tensor when DIR has no tensor `name`.
  std::vector<std::int64_t> shape(const std::string& name) const;
  void read(const std::string& name, const TensorSlice& slice) const;  // as TensorFile::read

 private:
  const TensorFile& shard(const std::string& name) const;
  void open_index(const std::string& index);

  std::string dir_;
  std::vector<std::unique_ptr<TensorFile>> shards_;
  std::map<std::string, std::size_t> shard_of_;  // tensor name -> its file in shards_
};

// The top-level fields of DIR/config.json as text, for comparison with the deck: strings as they
// are, numbers as written (768, 1e-05), true / false / null, arrays and objects as compact JSON.
// Throws InputError naming the file when it is absent, unreadable or not a JSON object.
std::map<std::string, std::string> read_hf_config(const std::string& dir);

}  // namespace trident
