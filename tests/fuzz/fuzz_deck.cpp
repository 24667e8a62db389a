// libFuzzer target: the deck parser with --set overrides (issue 22, item 6). The input is a deck's
// TOML text and, after a line "%%", one override per line. Bad input must end in InputError (the
// CLI's exit code 2 with a message naming the key); any other exception that escapes, a crash, a
// hang or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "deck/deck.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find("\n%%\n");
  std::vector<std::string> overrides;
  if (split != std::string::npos) {
    std::istringstream lines(input.substr(split + 4));
    for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  }
  try {
    (void)trident::parse_deck(input.substr(0, split), "fuzz.toml", overrides);
  } catch (const trident::InputError&) {
  }
  return 0;
}
