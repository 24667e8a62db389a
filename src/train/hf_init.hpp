// Starting from published weights (checkpoint.init = "hf:DIR"): a Hugging Face model folder's
// config.json is compared with the deck's model, then every rank reads the boxes of its own shards
// straight from the folder's safetensors or torch.save files (io/hf_weights), as it reads a trident
// checkpoint's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "family/model_config.hpp"
#include "io/tensor_slice.hpp"

namespace trident {

// One line per field where config.json (its top-level fields as io/hf_weights read_hf_config gives
// them) and the model disagree, naming the field, the deck key and both values; empty when the
// folder holds the model. seq_len bounds GPT-2's position table and a sliding window.
std::vector<std::string> hf_config_mismatches(const std::map<std::string, std::string>& config,
                                              const ModelConfig& model);

// Reads the model's tensors from DIR into the slices (DESIGN.md "Checkpoint" datasets named
// "model/<name with / for .>", with this rank's boxes), after checking config.json and that every
// tensor is there with its shape (InputError naming DIR, the tensor and both shapes; every rank
// checks every tensor, so all fail alike). GPT-2's position table may be longer than seq_len: its
// first rows are read. Returns a one-line summary for the log.
std::string read_hf_folder(const std::string& dir, const ModelConfig& model, std::vector<TensorSlice>& slices);

}  // namespace trident
