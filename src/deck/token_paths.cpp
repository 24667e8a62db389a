#include "deck/token_paths.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace trident {

namespace {

bool is_file(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(path, ignored);
}

bool is_pattern(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

const char* kRelativeNote =
    " (relative paths are relative to the deck's directory, or to the working directory for --set)";

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t found{};
  std::vector<std::string> files;
  if (::glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (std::size_t i = 0; i < found.gl_pathc; ++i)
      if (is_file(found.gl_pathv[i])) files.emplace_back(found.gl_pathv[i]);
  }
  ::globfree(&found);
  return files;
}

std::vector<std::string> token_files(const std::vector<std::string>& entries, const std::string& key,
                                     const KeyLocations& where) {
  std::vector<std::string> files;
  for (const std::string& entry : entries) {
    if (is_pattern(entry)) {
      const std::vector<std::string> matches = glob_files(entry);
      if (matches.empty()) where.fail(key, key + ": the pattern " + entry + " matches no file" + kRelativeNote);
      files.insert(files.end(), matches.begin(), matches.end());
    } else if (is_file(entry)) {
      files.push_back(entry);
    } else {
      where.fail(key, key + ": no such file: " + entry + kRelativeNote);
    }
  }
  return files;
}

std::vector<std::string> megatron_prefixes(const std::vector<std::string>& entries, const std::string& key,
                                           const KeyLocations& where) {
  for (const std::string& prefix : entries) {
    for (const char* suffix : {".bin", ".idx"}) {
      if (is_file(prefix + suffix)) continue;
      const bool gave_file = prefix.ends_with(".bin") || prefix.ends_with(".idx");
      where.fail(key, key + ": no Megatron dataset at prefix " + prefix + " (" + prefix + suffix + " is missing)" +
                          (gave_file ? "; give the prefix without .bin or .idx" : kRelativeNote));
    }
  }
  return entries;
}

void resolve(DataKind kind, std::vector<std::string>& paths, const std::string& key, const KeyLocations& where) {
  if (kind == DataKind::synthetic || paths.empty()) return;
  paths = kind == DataKind::megatron ? megatron_prefixes(paths, key, where) : token_files(paths, key, where);
  std::ranges::sort(paths);
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
}

}  // namespace

void resolve_token_paths(Deck& deck, const KeyLocations& where) {
  resolve(deck.data.kind, deck.data.paths, "data.path", where);
  if (deck.eval.enabled) resolve(deck.data.kind, deck.eval.paths, "eval.path", where);
}

}  // namespace trident
