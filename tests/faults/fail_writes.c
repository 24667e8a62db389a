/* A test-only LD_PRELOAD shim that makes writes to chosen files fail, as a broken disk would:
 * every write-family call on a file descriptor whose path ends with TRIDENT_FAIL_WRITES_TO fails
 * with errno TRIDENT_FAIL_WRITES_ERRNO (a number; default EIO), once TRIDENT_FAIL_WRITES_AFTER
 * bytes (default 0) have been written to such files. Nothing else changes (MPI-IO's helper files,
 * whose names contain the file's, included). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long written_to_matching;

static int should_fail(int fd, size_t bytes) {
  const char* pattern = getenv("TRIDENT_FAIL_WRITES_TO");
  if (pattern == NULL || *pattern == '\0') return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t length = readlink(link, path, sizeof path - 1);
  if (length < 0) return 0;
  path[length] = '\0';
  const size_t pattern_length = strlen(pattern);
  if ((size_t)length < pattern_length || strcmp(path + length - pattern_length, pattern) != 0) return 0;
  const char* after = getenv("TRIDENT_FAIL_WRITES_AFTER");
  if (written_to_matching + (long long)bytes <= (after ? atoll(after) : 0)) {
    written_to_matching += (long long)bytes;
    return 0;
  }
  const char* code = getenv("TRIDENT_FAIL_WRITES_ERRNO");
  errno = code ? atoi(code) : EIO;
  return 1;
}

static size_t iov_bytes(const struct iovec* iov, int count) {
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  return total;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void* buffer, size_t count) {
  return should_fail(fd, count) ? -1 : NEXT(write)(fd, buffer, count);
}
ssize_t pwrite(int fd, const void* buffer, size_t count, off_t offset) {
  return should_fail(fd, count) ? -1 : NEXT(pwrite)(fd, buffer, count, offset);
}
ssize_t pwrite64(int fd, const void* buffer, size_t count, off64_t offset) {
  return should_fail(fd, count) ? -1 : NEXT(pwrite64)(fd, buffer, count, offset);
}
ssize_t writev(int fd, const struct iovec* iov, int count) {
  return should_fail(fd, iov_bytes(iov, count)) ? -1 : NEXT(writev)(fd, iov, count);
}
ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  return should_fail(fd, iov_bytes(iov, count)) ? -1 : NEXT(pwritev)(fd, iov, count, offset);
}
ssize_t pwritev64(int fd, const struct iovec* iov, int count, off64_t offset) {
  return should_fail(fd, iov_bytes(iov, count)) ? -1 : NEXT(pwritev64)(fd, iov, count, offset);
}
