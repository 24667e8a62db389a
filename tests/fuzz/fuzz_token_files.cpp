// libFuzzer target: the token-file readers (issue 22, item 6). The first input byte picks the
// format: even, an llm.c shard (the rest is the file); odd, a Megatron dataset (the next four
// bytes give the .idx file's length, then the .idx bytes, then the .bin bytes). A file the reader
// accepts is read whole. A bad file must end in InputError; anything else is a bug.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/llmc_shard.hpp"
#include "data/megatron_dataset.hpp"

namespace {

const std::string& scratch_prefix() {
  static const std::string prefix = "/tmp/trident_fuzz_tokens_" + std::to_string(getpid());
  return prefix;
}

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

std::unique_ptr<trident::TokenSource> open_from(const std::uint8_t* data, std::size_t size) {
  const std::string& prefix = scratch_prefix();
  if (data[0] % 2 == 0) {
    write_file(prefix + ".bin", data + 1, size - 1);
    return trident::open_llmc_shard(prefix + ".bin", "data.path");
  }
  std::uint32_t idx_size = 0;
  if (size >= 5) std::memcpy(&idx_size, data + 1, sizeof idx_size);
  const std::size_t rest = size >= 5 ? size - 5 : 0;
  const std::size_t idx_bytes = std::min<std::size_t>(idx_size, rest);
  write_file(prefix + ".idx", data + 5, idx_bytes);
  write_file(prefix + ".bin", data + 5 + idx_bytes, rest - idx_bytes);
  return trident::open_megatron_dataset(prefix, "data.path");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  try {
    const std::unique_ptr<trident::TokenSource> tokens = open_from(data, size);
    std::vector<std::int64_t> chunk(4096);
    const std::int64_t total = std::min<std::int64_t>(tokens->size(), 1 << 20);
    for (std::int64_t first = 0; first < total; first += 4096) {
      const std::int64_t count = std::min<std::int64_t>(4096, total - first);
      tokens->read(first, count, chunk.data());
    }
    (void)tokens->describe();
  } catch (const trident::InputError&) {
  }
  return 0;
}
