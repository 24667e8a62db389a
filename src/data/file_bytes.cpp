#include "data/file_bytes.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/error.hpp"

namespace trident {

std::vector<unsigned char> read_file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    throw InputError("data.path = '" + path + "': cannot open the file (" + std::strerror(errno) +
                     "); set data.path to an existing token file");
  }
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) {
    throw InputError("data.path = '" + path + "': reading the file failed (" + std::strerror(errno) + ")");
  }
  return bytes;
}

}  // namespace trident
