// Helpers shared by the deck tests: build small decks and capture the error they raise.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "deck/deck.hpp"

namespace trident::testing {

// A valid deck with a small model; tests add or replace keys in it.
inline const char* const kMinimalDeck =
    "[model]\n"
    "layers = 4\n"
    "d_model = 64\n"
    "heads = 4\n"
    "seq_len = 16\n"
    "vocab = 256\n";

inline Deck parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_deck(text, "deck.toml", overrides);
}

// The message of the InputError that parsing raises; fails the test when it does not throw.
inline std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse(text, overrides);
  } catch (const InputError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an InputError for deck:\n" << text;
  return {};
}

// A fresh, empty directory under the test temp dir, removed when this object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::path(::testing::TempDir()) / ("trident_deck_" + name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& content) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace trident::testing
