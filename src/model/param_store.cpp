#include "model/param_store.hpp"

#include <numeric>
#include <stdexcept>

namespace trident {

const ParamTensor& ParamStore::add(std::string name, std::vector<std::int64_t> shape) {
  if (values.size() != 0) throw std::logic_error("ParamStore::add after allocate(): " + name);
  ParamTensor tensor;
  tensor.size = static_cast<std::size_t>(
      std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()));
  tensor.weight_decay = shape.size() == 2;
  tensor.offset = total_;
  tensor.name = std::move(name);
  tensor.shape = std::move(shape);
  total_ += tensor.size;
  tensors_.push_back(std::move(tensor));
  return tensors_.back();
}

void ParamStore::allocate() {
  values = FloatBuffer("params", total_);
  grads = FloatBuffer("grads", total_);
}

const ParamTensor& ParamStore::find(const std::string& name) const {
  for (const auto& tensor : tensors_)
    if (tensor.name == name) return tensor;
  throw std::out_of_range("no parameter named " + name);
}

}  // namespace trident
