#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace trident {

namespace {

[[noreturn]] void fail(const std::string& key, const std::string& path, const std::string& what) {
  throw InputError(key + " = '" + path + "': " + what + " (" + std::strerror(errno) + "); point " + key +
                   " at an existing, readable file");
}

}  // namespace

MappedFile::MappedFile(const std::string& path, const std::string& key) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(key, path, "cannot open the file");
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    ::close(fd);
    fail(key, path, "cannot read the file's size");
  }
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      fail(key, path, "cannot map the file into memory");
    }
    data_ = static_cast<const unsigned char*>(mapped);
  }
  ::close(fd);  // the mapping keeps the file's pages reachable
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace trident
