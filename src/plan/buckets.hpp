// How the flat gradient buffer is cut for data-parallel reduction. Backward finishes gradients
// from the end of the buffer toward its start (ln_f, the blocks from last to first, then the
// embeddings), so the buckets are counted from the end: bucket 0 ends at the last element and is
// the first to be reduced. Buckets are plain element ranges; they may cut a tensor.
//
// Under ZeRO-1 each bucket is reduce-scattered: it is split into dp equal pieces (the bucket at
// offset 0, the only one whose length need not divide by dp, is padded at its end), and rank r
// owns piece r of every bucket. A rank's shard is thus one piece per bucket, which lets each
// bucket's reduction start as soon as it is ready, as in Megatron-LM's distributed optimizer.
//
// Under expert parallelism the buffer is cut in regions first: a mixture's experts are reduced
// over the ranks holding the same experts (the expert-data-parallel group), the rest over dp; no
// bucket crosses a region's border, and each region's first bucket may be padded.
#pragma once

#include <cstddef>
#include <vector>

namespace trident {

// Flat elements [offset, offset + count) of the parameter buffer, held by a rank at
// [local, local + count) of its reduced-gradient buffer (and of sharded optimizer state).
struct HeldRange {
  std::size_t offset = 0;
  std::size_t count = 0;
  std::size_t local = 0;
};

struct Bucket {
  std::size_t offset = 0;        // first element in the flat buffer
  std::size_t size = 0;          // elements
  std::size_t piece = 0;         // ⌈size / ranks⌉: one rank's share under ZeRO-1
  std::size_t shard_offset = 0;  // where this bucket's piece starts in a rank's shard
  int ranks = 1;                 // the ranks it is reduced over
  bool experts = false;          // a mixture's experts: reduced over the expert-data-parallel group

  bool padded(int dp) const { return piece * static_cast<std::size_t>(dp) != size; }
  // The real (non-padding) elements of piece `rank`; count 0 when the piece is all padding.
  HeldRange owned_by(int rank) const;
};

// Buckets of bucket_elements (rounded up to a multiple of dp) covering [0, total), in the order
// they are reduced: from the end of the buffer toward its start. None when total is 0.
std::vector<Bucket> plan_buckets(std::size_t total, std::size_t bucket_elements, int dp);

// Elements [offset, offset + size) of the buffer, reduced over `ranks` ranks.
struct BucketRegion {
  std::size_t offset = 0;
  std::size_t size = 0;
  int ranks = 1;
  bool experts = false;
};
// The same over consecutive regions covering the buffer (in offset order), each cut on its own.
std::vector<Bucket> plan_buckets(const std::vector<BucketRegion>& regions, std::size_t bucket_elements);

// Elements of one rank's shard: the sum of the buckets' pieces.
std::size_t shard_size(const std::vector<Bucket>& buckets);

// Elements of a bucket of `bucket_mb` MiB of float gradients (the deck's parallel.bucket_mb), at least one.
std::size_t bucket_elements(double bucket_mb);

// Floats that ZeRO-1 keeps on each rank besides the full gradients (dp/gradient_sync.cpp): the
// shard the buckets are reduce-scattered into and, where a bucket is padded, two padded copies of
// the largest such bucket to reduce-scatter and all-gather through.
std::size_t zero1_gradient_floats(const std::vector<Bucket>& buckets);
// The elements of the largest padded bucket with its padding (0: none is padded).
std::size_t largest_padded_bucket(const std::vector<Bucket>& buckets);

}  // namespace trident
