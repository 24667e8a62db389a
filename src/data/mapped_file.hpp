// A read-only memory map of a whole file. Token data is paged in as windows are read, so a corpus
// larger than RAM costs each rank only the pages it touches, and ranks on one node share them.
#pragma once

#include <cstddef>
#include <string>

namespace trident {

class MappedFile {
 public:
  // `key` is the deck key that named the file (data.path, eval.path), for messages. Throws
  // InputError naming both when the file cannot be opened or mapped.
  MappedFile(const std::string& path, const std::string& key);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;  // null for an empty file
  std::size_t size_ = 0;
};

}  // namespace trident
