// Megatron-LM's indexed dataset (data.kind = "megatron"), read in place: `prefix`.bin holds the
// tokens of every sequence back to back, `prefix`.idx describes them. The index, as Megatron's
// preprocess_data.py writes it (megatron/core/datasets/indexed_dataset.py):
//   9 bytes  "MMIDIDX\0\0"
//   uint64   version (1)
//   uint8    dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16
//   uint64   S, the sequence count;  uint64 D, the document-index count
//   int32    sequence lengths [S] (tokens);  int64 sequence pointers [S] (byte offsets in .bin)
//   int64    document indices [D]
// Without shuffling the sequences are read in order as one token stream.
#pragma once

#include <memory>
#include <string>

#include "data/token_source.hpp"

namespace trident {

// Throws InputError naming the file for a missing .bin or .idx, a wrong header, an unknown or
// non-integer dtype, an unsupported version, or sizes that disagree with the index.
std::unique_ptr<TokenSource> open_megatron_dataset(const std::string& prefix, const std::string& key);

}  // namespace trident
