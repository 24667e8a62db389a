#include "io/checkpoint_header.hpp"

#include <limits>

#include "io/parallel_checkpoint.hpp"

namespace trident {

namespace {

const AttributeValue* find(const Attributes& attributes, const std::string& name) {
  for (const auto& [key, value] : attributes)
    if (key == name) return &value;
  return nullptr;
}

template <class T>
const T& required(const Attributes& attributes, const std::string& name, const std::string& path) {
  const AttributeValue* value = find(attributes, name);
  if (value == nullptr) throw CheckpointError("checkpoint '" + path + "': attribute '" + name + "' is missing");
  const T* typed = std::get_if<T>(value);
  if (typed == nullptr)
    throw CheckpointError("checkpoint '" + path + "': attribute '" + name + "' has the wrong type (expected " +
                          (std::is_same_v<T, std::string> ? "a string" : "an integer") + ")");
  return *typed;
}

std::int64_t in_range(std::int64_t value, std::int64_t low, std::int64_t high, const std::string& name,
                      const std::string& path) {
  if (value < low || value > high)
    throw CheckpointError("checkpoint '" + path + "': attribute '" + name + "' is " + std::to_string(value) +
                          ", outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  return value;
}

}  // namespace

CheckpointHeader checkpoint_header(const Attributes& attributes, const std::string& path) {
  CheckpointHeader header;
  header.step = static_cast<int>(
      in_range(required<std::int64_t>(attributes, "step", path), 0, std::numeric_limits<int>::max(), "step", path));
  header.grid = required<std::string>(attributes, "grid", path);
  if (find(attributes, "data_windows") != nullptr) {
    header.data_windows = in_range(required<std::int64_t>(attributes, "data_windows", path), 1,
                                   std::numeric_limits<std::int64_t>::max(), "data_windows", path);
    header.data_shuffled =
        in_range(required<std::int64_t>(attributes, "data_shuffle", path), 0, 1, "data_shuffle", path) == 1;
  }
  return header;
}

}  // namespace trident
