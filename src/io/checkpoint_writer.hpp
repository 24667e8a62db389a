// Checkpoint files in the contract layout (DESIGN.md "Checkpoint"): whole, unsharded tensors under
// Hugging Face GPT-2 names at /model/<name with '.' -> '/'>, float32, attributes on the root,
// committed by writing <dir>/step_XXXXXXXX.h5.tmp, renaming it and rewriting <dir>/latest.
//
// This writer runs on one rank, which receives the tensors already gathered; the collective
// (MPI-IO, each rank its hyperslabs) writer with optimizer state and checksums replaces it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_attributes.hpp"

namespace trident {

struct NamedTensor {
  std::string name;                 // HF name without "transformer.", e.g. "h.0.attn.c_attn.weight"
  std::vector<std::int64_t> shape;  // HF shape
  std::vector<float> values;        // row-major, whole tensor
};

std::string checkpoint_file_name(int step);  // "step_00000005.h5"

// Writes and commits the checkpoint of `step` into `dir` (created if missing); returns its path.
std::string write_checkpoint(const std::string& dir, int step, const std::vector<NamedTensor>& tensors,
                             const Attributes& attributes);

}  // namespace trident
