// All parameters of the model in one flat device buffer (as llm.c), with one descriptor per
// tensor under its Hugging Face GPT-2 name. Gradients use the same layout in a second buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace trident {

struct ParamTensor {
  std::string name;                 // HF GPT-2 name without "transformer.", e.g. "h.0.attn.c_attn.weight"
  std::vector<std::int64_t> shape;  // HF shape (Conv1D weights are [in, out])
  std::size_t offset = 0;           // first element in ParamStore::values / grads
  std::size_t size = 0;             // number of elements
  bool weight_decay = false;        // AdamW decay applies to 2-D weights only

  float* in(const FloatBuffer& buffer) const { return buffer.data() + offset; }
};

class ParamStore {
 public:
  // Appends a tensor descriptor; call allocate() once all are added.
  const ParamTensor& add(std::string name, std::vector<std::int64_t> shape);
  void allocate();  // allocates values and grads (zeroed)

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& find(const std::string& name) const;  // throws std::out_of_range
  std::size_t total_size() const { return total_; }

  FloatBuffer values;
  FloatBuffer grads;

 private:
  std::vector<ParamTensor> tensors_;
  std::size_t total_ = 0;
};

}  // namespace trident
