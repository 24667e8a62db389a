// This process's memory as the OS sees it: the resident set's high-water mark (what /steps'
// peak_rss_bytes records), and the node's physical memory (what a rank's planned memory is held
// against before a run starts).
#pragma once

#include <cstdint>

namespace trident {

// getrusage's ru_maxrss, in bytes: the most resident memory the process has held so far.
std::int64_t peak_resident_bytes();

// The node's physical memory in bytes (sysconf: pages x page size).
std::int64_t node_memory_bytes();

}  // namespace trident
