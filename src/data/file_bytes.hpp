#pragma once

#include <string>
#include <vector>

namespace trident {

// The whole content of the data file at `path` (deck key data.path); throws InputError naming
// the path and the reason when it cannot be opened or read.
std::vector<unsigned char> read_file_bytes(const std::string& path);

}  // namespace trident
