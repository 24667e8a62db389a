#include "io/hf_weights.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "io/safetensors.hpp"
#include "io/torch_file.hpp"

namespace trident {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The layouts Hugging Face writes, in the order from_pretrained prefers them: one file, or an index
// of shards (weight_map: tensor -> file).
struct Layout {
  const char* single;
  const char* index;
};
constexpr Layout kLayouts[] = {{"model.safetensors", "model.safetensors.index.json"},
                               {"pytorch_model.bin", "pytorch_model.bin.index.json"}};

std::unique_ptr<TensorFile> open_weights(const std::string& path) {
  if (path.ends_with(".safetensors")) return std::make_unique<SafetensorsFile>(path);
  return std::make_unique<TorchFile>(path);
}

std::string join(const std::string& dir, const std::string& file) { return (fs::path(dir) / file).string(); }

bool present(const std::string& path) {
  std::error_code unreadable;  // a path that cannot be inspected counts as absent
  return fs::exists(path, unreadable);
}

[[noreturn]] void reject(const std::string& dir, const std::string& what) {
  throw InputError("Hugging Face model folder '" + dir + "' " + what);
}

[[noreturn]] void reject_folder_without_weights(const std::string& dir) {
  if (std::error_code ignored; !fs::is_directory(dir, ignored)) reject(dir, "is not a directory");
  reject(dir, "holds no weights: neither model.safetensors, model.safetensors.index.json, pytorch_model.bin nor "
              "pytorch_model.bin.index.json");
}

json read_json_object(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("'" + path + "' cannot be opened");
  json value;
  try {
    value = json::parse(in);
  } catch (const json::exception& error) {
    throw InputError("'" + path + "' is not valid JSON (" + error.what() + ")");
  }
  if (!value.is_object()) throw InputError("'" + path + "' holds a JSON " + value.type_name() + ", not an object");
  return value;
}

}  // namespace

HfWeights::HfWeights(const std::string& dir) : dir_(dir) {
  for (const Layout& layout : kLayouts) {
    if (present(join(dir, layout.single))) {
      shards_.push_back(open_weights(join(dir, layout.single)));
      for (const auto& entry : shards_.front()->tensors()) shard_of_.emplace(entry.first, 0);
      return;
    }
    if (present(join(dir, layout.index))) {
      open_index(join(dir, layout.index));
      return;
    }
  }
  reject_folder_without_weights(dir);
}

// Opens each shard the index names once, and checks it holds the tensors mapped to it.
void HfWeights::open_index(const std::string& index) {
  const json root = read_json_object(index);
  const auto weight_map = root.find("weight_map");
  if (weight_map == root.end() || !weight_map->is_object())
    throw InputError("'" + index + "' has no weight_map object (tensor name -> shard file)");
  std::map<std::string, std::size_t> opened;  // shard file name -> its place in shards_
  for (const auto& [name, file] : weight_map->items()) {
    if (!file.is_string())
      throw InputError("'" + index + "' maps tensor '" + name + "' to " + file.dump() + ", not a file name");
    const std::string shard = file.get<std::string>(), path = join(dir_, shard);
    const auto [at, first_use] = opened.emplace(shard, shards_.size());
    if (first_use) {
      if (!present(path))
        throw InputError("'" + index + "' names shard '" + shard + "' (for tensor '" + name + "'), but '" + path +
                         "' does not exist: an incomplete download?");
      shards_.push_back(open_weights(path));
    }
    if (!shards_[at->second]->tensors().contains(name))
      throw InputError("'" + index + "' maps tensor '" + name + "' to '" + shard + "', but '" + path +
                       "' holds no such tensor");
    shard_of_.emplace(name, at->second);
  }
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> names;
  for (const auto& entry : shard_of_) names.push_back(entry.first);
  return names;
}

const TensorFile& HfWeights::shard(const std::string& name) const {
  const auto found = shard_of_.find(name);
  if (found == shard_of_.end()) reject(dir_, "has no tensor '" + name + "'");
  return *shards_[found->second];
}

std::vector<std::int64_t> HfWeights::shape(const std::string& name) const {
  return shard(name).tensors().at(name).shape;
}

void HfWeights::read(const std::string& name, const TensorSlice& slice) const { shard(name).read(name, slice); }

std::map<std::string, std::string> read_hf_config(const std::string& dir) {
  const std::string path = join(dir, "config.json");
  if (!present(path))
    throw InputError("'" + path + "' does not exist: a Hugging Face model folder holds config.json beside its weights");
  const json config = read_json_object(path);  // named: items() of a temporary would dangle in the loop
  std::map<std::string, std::string> fields;
  // dump() prints integers as integers and reals in their shortest round-trip form (1e-05).
  for (const auto& [key, value] : config.items())
    fields.emplace(key, value.is_string() ? value.get<std::string>() : value.dump());
  return fields;
}

}  // namespace trident
