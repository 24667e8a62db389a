#include "kernels/attention.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int B = 2, T = 5, C = 12, H = 3, hd = C / H;

struct AttentionCase {
  GemmContext gemm;
  AttentionShape shape = AttentionShape::fused_qkv(B, T, C, H, AttentionKernel::explicit_probabilities);
  FloatBuffer qkv = random_buffer(B * T * 3 * C, 1);
  FloatBuffer out{"out", B * T * C}, probs{"probs", B * H * T * T};
  FloatBuffer scratch{"scratch", attention_scratch_floats(shape)};
  void forward() {
    attention_forward(gemm, out.data(), probs.data(), scratch.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C,
                      shape);
  }
};

TEST(Attention, ForwardMatchesCausalReference) {
  AttentionCase a;
  a.forward();
  const auto qkv = to_host(a.qkv), out = to_host(a.out), probs = to_host(a.probs);
  auto at = [&](int b, int t, int block, int h, int d) { return double(qkv[(b * T + t) * 3 * C + block * C + h * hd + d]); };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        // Only keys 0..t take part; scores scaled by 1/√hd.
        std::vector<double> p(t + 1);
        double max = -1e300, sum = 0.0;
        for (int j = 0; j <= t; ++j) {
          for (int d = 0; d < hd; ++d) p[j] += at(b, t, 0, h, d) * at(b, j, 1, h, d);
          p[j] /= std::sqrt(double(hd));
          max = std::max(max, p[j]);
        }
        for (double& v : p) sum += (v = std::exp(v - max));
        for (int j = 0; j < T; ++j)
          EXPECT_NEAR(probs[((b * H + h) * T + t) * T + j], j <= t ? p[j] / sum : 0.0, 1e-6);
        for (int d = 0; d < hd; ++d) {
          double o = 0.0;
          for (int j = 0; j <= t; ++j) o += p[j] / sum * at(b, j, 2, h, d);
          EXPECT_NEAR(out[(b * T + t) * C + h * hd + d], o, 1e-5);
        }
      }
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  AttentionCase a;
  const FloatBuffer proj = random_buffer(B * T * C, 2);
  auto objective = [&] {
    a.forward();
    return dot(proj, a.out);
  };
  a.forward();
  // dqkv is overwritten, the scratch is written: fill both with garbage first.
  const FloatBuffer dqkv = random_buffer(B * T * 3 * C, 3), dprobs = random_buffer(B * H * T * T, 4);
  const float* qkv = a.qkv.data();
  attention_backward(a.gemm, dqkv.data(), dqkv.data() + C, dqkv.data() + 2 * C, dprobs.data(), proj.data(), qkv,
                     qkv + C, qkv + 2 * C, a.out.data(), a.probs.data(), a.shape);
  expect_gradient("qkv", a.qkv, to_host(dqkv), objective, 1e-2f);
}

// Grouped-query attention: 4 query heads share 2 kv heads (query head h reads kv head h / 2), q and
// k/v in separate buffers with padded rows.
constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 4;
constexpr long q_ld = kHeads * kHeadDim + 1, kv_ld = kKvHeads * kHeadDim + 3, out_ld = kHeads * kHeadDim + 2;

struct GqaCase {
  GemmContext gemm;
  FloatBuffer q = random_buffer(B * T * q_ld, 11), k = random_buffer(B * T * kv_ld, 12),
              v = random_buffer(B * T * kv_ld, 13);
  FloatBuffer out{"out", B*T*out_ld}, probs{"probs", B*kHeads*T*T};
  AttentionShape shape{B, T, kHeads, kKvHeads, kHeadDim, q_ld, kv_ld, out_ld, AttentionKernel::explicit_probabilities};
  FloatBuffer scratch{"scratch", attention_scratch_floats(shape)};
  void forward() {
    attention_forward(gemm, out.data(), probs.data(), scratch.data(), q.data(), k.data(), v.data(), shape);
  }
};

TEST(Attention, GroupedQueryHeadsReadTheirSharedKeyValueHead) {
  GqaCase a;
  a.forward();
  const auto q = to_host(a.q), k = to_host(a.k), v = to_host(a.v), out = to_host(a.out);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < kHeads; ++h) {
      const int j = h / (kHeads / kKvHeads);
      for (int t = 0; t < T; ++t) {
        std::vector<double> p(t + 1);
        double max = -1e300, sum = 0.0;
        for (int s = 0; s <= t; ++s) {
          for (int d = 0; d < kHeadDim; ++d)
            p[s] += double(q[(b * T + t) * q_ld + h * kHeadDim + d]) * k[(b * T + s) * kv_ld + j * kHeadDim + d];
          p[s] /= std::sqrt(double(kHeadDim));
          max = std::max(max, p[s]);
        }
        for (double& x : p) sum += (x = std::exp(x - max));
        for (int d = 0; d < kHeadDim; ++d) {
          double o = 0.0;
          for (int s = 0; s <= t; ++s) o += p[s] / sum * v[(b * T + s) * kv_ld + j * kHeadDim + d];
          EXPECT_NEAR(out[(b * T + t) * out_ld + h * kHeadDim + d], o, 1e-5) << "b " << b << " h " << h << " t " << t;
        }
      }
    }
}

// Finite differences through q, k and v of the grouped-query case, with `kernel` (and documents).
void expect_grouped_query_gradients(AttentionKernel kernel, DocumentMask documents = {}) {
  GqaCase a;
  a.shape.kernel = kernel;
  a.shape.documents = documents;
  a.scratch = random_buffer(attention_scratch_floats(a.shape), 18);  // garbage: the kernel must overwrite it
  const FloatBuffer proj = random_buffer(B * T * out_ld, 14);
  auto objective = [&] {
    a.forward();
    return dot(proj, a.out);
  };
  a.forward();
  // Overwritten outputs: filled with garbage first.
  const FloatBuffer dq = random_buffer(B * T * q_ld, 15), dk = random_buffer(B * T * kv_ld, 16),
                    dv = random_buffer(B * T * kv_ld, 17);
  attention_backward(a.gemm, dq.data(), dk.data(), dv.data(), a.scratch.data(), proj.data(), a.q.data(), a.k.data(),
                     a.v.data(), a.out.data(), a.probs.data(), a.shape);
  // Padding columns carry no gradient: zero them in the analytic result as the objective ignores them.
  auto real_columns = [](std::vector<float> grad, long ld, int width) {
    for (std::size_t i = 0; i < grad.size(); ++i)
      if (static_cast<long>(i % ld) >= width) grad[i] = 0.0f;
    return grad;
  };
  expect_gradient("q", a.q, real_columns(to_host(dq), q_ld, kHeads * kHeadDim), objective, 1e-2f);
  expect_gradient("k", a.k, real_columns(to_host(dk), kv_ld, kKvHeads * kHeadDim), objective, 1e-2f);
  expect_gradient("v", a.v, real_columns(to_host(dv), kv_ld, kKvHeads * kHeadDim), objective, 1e-2f);
}

TEST(Attention, GroupedQueryBackwardMatchesFiniteDifferences) {
  expect_grouped_query_gradients(AttentionKernel::explicit_probabilities);
}

// The tiled kernel against the explicit one, on shapes with several tiles and a short last one
// (T = 600: query tiles 4 × 128 + 88, key tiles 512 + 88; T = 1089: key tiles 512 + 512 + 65), grouped-query
// heads and padded rows: the outputs and every gradient
// agree within the numerics contract's 1e-5 (relative to the values' scale).
struct KernelRun {
  std::vector<float> out, dq, dk, dv;
};

KernelRun run_kernel(AttentionShape shape, AttentionKernel kernel, std::uint64_t seed) {
  shape.kernel = kernel;
  const std::size_t q_floats = static_cast<std::size_t>(shape.B) * shape.T * shape.q_ld;
  const std::size_t kv_floats = static_cast<std::size_t>(shape.B) * shape.T * shape.kv_ld;
  const std::size_t out_floats = static_cast<std::size_t>(shape.B) * shape.T * shape.out_ld;
  GemmContext gemm;
  const FloatBuffer q = random_buffer(q_floats, seed), k = random_buffer(kv_floats, seed + 1),
                    v = random_buffer(kv_floats, seed + 2), dout = random_buffer(out_floats, seed + 3);
  // Outputs and scratch start as garbage: the kernels must overwrite what they return.
  const FloatBuffer out = random_buffer(out_floats, 90), saved = random_buffer(attention_saved_floats(shape), 91),
                    scratch = random_buffer(attention_scratch_floats(shape), 92), dq = random_buffer(q_floats, 93),
                    dk = random_buffer(kv_floats, 94), dv = random_buffer(kv_floats, 95);
  attention_forward(gemm, out.data(), saved.data(), scratch.data(), q.data(), k.data(), v.data(), shape);
  attention_backward(gemm, dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), q.data(), k.data(), v.data(),
                     out.data(), saved.data(), shape);
  return {to_host(out), to_host(dq), to_host(dk), to_host(dv)};
}

void expect_tiled_matches_explicit(const AttentionShape& shape) {
  const KernelRun tiled = run_kernel(shape, AttentionKernel::tiled, 21);
  const KernelRun reference = run_kernel(shape, AttentionKernel::explicit_probabilities, 21);
  const long q_width = long{shape.heads} * shape.head_dim, kv_width = long{shape.kv_heads} * shape.head_dim;
  expect_equal_columns("out", tiled.out, reference.out, shape.out_ld, q_width);
  expect_equal_columns("dq", tiled.dq, reference.dq, shape.q_ld, q_width);
  expect_equal_columns("dk", tiled.dk, reference.dk, shape.kv_ld, kv_width);
  expect_equal_columns("dv", tiled.dv, reference.dv, shape.kv_ld, kv_width);
}

TEST(TiledAttention, MatchesExplicitOnGroupedQueryHeadsOverSeveralTiles) {
  expect_tiled_matches_explicit({2, 600, 4, 2, 16, 4 * 16 + 3, 2 * 16 + 1, 4 * 16 + 5});
}

TEST(TiledAttention, MatchesExplicitOnMultiHeadAttentionOverSeveralTiles) {
  expect_tiled_matches_explicit(
      AttentionShape::fused_qkv(1, 2 * kAttentionKeyTile + kAttentionQueryTile / 2 + 1, 24, 3, AttentionKernel::tiled));
}

TEST(TiledAttention, BackwardMatchesFiniteDifferences) { expect_grouped_query_gradients(AttentionKernel::tiled); }

// Packed documents (kernels/document_mask.hpp): the starts of each token's document, held on the
// device and the host as the kernels read them.
struct Documents {
  std::vector<int> host;
  IntBuffer device;
  // Each sequence of T tokens cut before each position in `cuts[b]`.
  Documents(int sequences, int length, const std::vector<std::vector<int>>& cuts) {
    for (int b = 0; b < sequences; ++b)
      for (int t = 0, start = 0; t < length; ++t) {
        for (int cut : cuts[b]) start = t >= cut ? std::max(start, cut) : start;
        host.push_back(start);
      }
    device = int_buffer(host);
  }
  DocumentMask mask() const { return {device.data(), host.data()}; }
};

// Each query sees only the keys of its own document, [start, t]: the grouped-query case against a
// reference written here, sequence 0 cut into three documents, sequence 1 into two.
TEST(Attention, DocumentMaskKeepsEachQueryInItsDocument) {
  const Documents documents(B, T, {{2, 3}, {4}});
  for (AttentionKernel kernel : {AttentionKernel::explicit_probabilities, AttentionKernel::tiled}) {
    GqaCase a;
    a.shape.kernel = kernel;
    a.shape.documents = documents.mask();
    a.scratch = FloatBuffer("scratch", attention_scratch_floats(a.shape));  // the tiled kernel's
    a.forward();
    const auto q = to_host(a.q), k = to_host(a.k), v = to_host(a.v), out = to_host(a.out);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < kHeads; ++h)
        for (int t = 0; t < T; ++t) {
          const int start = documents.host[b * T + t], j = h / (kHeads / kKvHeads);
          std::vector<double> p(t + 1, 0.0);
          double max = -1e300, sum = 0.0;
          for (int s = start; s <= t; ++s) {
            for (int d = 0; d < kHeadDim; ++d)
              p[s] += double(q[(b * T + t) * q_ld + h * kHeadDim + d]) * k[(b * T + s) * kv_ld + j * kHeadDim + d];
            p[s] /= std::sqrt(double(kHeadDim));
            max = std::max(max, p[s]);
          }
          for (int s = start; s <= t; ++s) sum += (p[s] = std::exp(p[s] - max));
          for (int d = 0; d < kHeadDim; ++d) {
            double o = 0.0;
            for (int s = start; s <= t; ++s) o += p[s] / sum * v[(b * T + s) * kv_ld + j * kHeadDim + d];
            EXPECT_NEAR(out[(b * T + t) * out_ld + h * kHeadDim + d], o, 1e-5)
                << (kernel == AttentionKernel::tiled ? "tiled" : "explicit") << " b " << b << " h " << h << " t " << t;
          }
        }
  }
}

TEST(Attention, DocumentMaskBackwardMatchesFiniteDifferences) {
  const Documents documents(B, T, {{2, 3}, {4}});
  expect_grouped_query_gradients(AttentionKernel::explicit_probabilities, documents.mask());
  expect_grouped_query_gradients(AttentionKernel::tiled, documents.mask());
}

// Over several tiles, with documents that start on a key tile's edge (query tile 4 then skips key
// tile 0, and key tile 0's last query tile is 3), a one-token document at the end, and rows whose
// document starts past the first key tile their query tile sees (sequence 1's rows from 530 see
// nothing of key tile 0): the tiled kernel equals the explicit one, output and gradients.
TEST(TiledAttention, MatchesExplicitWithPackedDocumentsOverSeveralTiles) {
  const int length = 600;
  const Documents documents(2, length, {{130, 300, kAttentionKeyTile, 560}, {5, 530, length - 1}});
  AttentionShape shape{2, length, 4, 2, 16, 4 * 16 + 3, 2 * 16 + 1, 4 * 16 + 5};
  shape.documents = documents.mask();
  expect_tiled_matches_explicit(shape);
}

// Context parallelism's arithmetic on one rank: a sequence cut into chunks, each chunk's queries
// against every chunk of keys at or before it (chunk offsets) merged by their log-sum-exp, and the
// gradients of each pair added up, equal attention over the whole sequence. Chunks of 600 positions
// span several query and key tiles; with and without packed documents (one crossing chunk borders).
void expect_chunk_pairs_match_whole_sequence(bool with_documents) {
  constexpr int chunks = 3, L = 600, total = chunks * L, sequences = 2;
  const int heads = 4, kv_heads = 2, hd = 16;
  const long q_ld = heads * hd + 3, kv_ld = kv_heads * hd + 1, out_ld = heads * hd + 5;
  const Documents documents(sequences, total, {{130, 700, 1250}, {5, 1199, 1200}});
  AttentionShape whole{sequences, total, heads, kv_heads, hd, q_ld, kv_ld, out_ld};
  if (with_documents) whole.documents = documents.mask();
  const KernelRun reference = run_kernel(whole, AttentionKernel::tiled, 41);

  GemmContext gemm;
  const std::size_t rows = std::size_t{sequences} * total;
  const std::size_t q_floats = rows * q_ld, kv_floats = rows * kv_ld, out_floats = rows * out_ld;
  const FloatBuffer q = random_buffer(q_floats, 41), k = random_buffer(kv_floats, 42), v = random_buffer(kv_floats, 43),
                    dout = random_buffer(out_floats, 44);
  const FloatBuffer out{"out", out_floats}, part{"part", std::size_t{L} * out_ld};
  const FloatBuffer dq{"dq", q_floats}, dk{"dk", kv_floats}, dv{"dv", kv_floats};
  const FloatBuffer lse{"lse", std::size_t{sequences} * chunks * heads * L};
  const FloatBuffer part_lse{"part_lse", std::size_t{heads} * L};
  auto pair = [&](int b, int c, int key_chunk) {
    AttentionShape shape{1, L, heads, kv_heads, hd, q_ld, kv_ld, out_ld};
    shape.query_offset = c * L, shape.key_offset = key_chunk * L, shape.accumulate_grads = true;
    if (with_documents) {
      const long first = long{b} * total + long{c} * L;
      shape.documents = {documents.device.data() + first, documents.host.data() + first};
    }
    return shape;
  };
  const FloatBuffer scratch{"scratch", attention_scratch_floats(pair(0, 0, 0))};
  for (int b = 0; b < sequences; ++b)
    for (int c = 0; c < chunks; ++c) {
      const long q_row = long{b} * total + long{c} * L;
      float* out_c = out.data() + q_row * out_ld;
      float* lse_c = lse.data() + (long{b} * chunks + c) * heads * L;
      for (int key_chunk = 0; key_chunk <= c; ++key_chunk) {
        const long kv_row = long{b} * total + long{key_chunk} * L;
        attention_forward(gemm, key_chunk == 0 ? out_c : part.data(), key_chunk == 0 ? lse_c : part_lse.data(),
                          scratch.data(), q.data() + q_row * q_ld, k.data() + kv_row * kv_ld,
                          v.data() + kv_row * kv_ld, pair(b, c, key_chunk));
        if (key_chunk > 0) attention_merge(out_c, lse_c, part.data(), part_lse.data(), pair(b, c, key_chunk));
      }
      for (int key_chunk = 0; key_chunk <= c; ++key_chunk) {
        const long kv_row = long{b} * total + long{key_chunk} * L;
        attention_backward(gemm, dq.data() + q_row * q_ld, dk.data() + kv_row * kv_ld, dv.data() + kv_row * kv_ld,
                           scratch.data(), dout.data() + q_row * out_ld, q.data() + q_row * q_ld,
                           k.data() + kv_row * kv_ld, v.data() + kv_row * kv_ld, out_c, lse_c, pair(b, c, key_chunk));
      }
    }
  const long q_width = long{heads} * hd, kv_width = long{kv_heads} * hd;
  expect_equal_columns("out", to_host(out), reference.out, out_ld, q_width);
  expect_equal_columns("dq", to_host(dq), reference.dq, q_ld, q_width);
  expect_equal_columns("dk", to_host(dk), reference.dk, kv_ld, kv_width);
  expect_equal_columns("dv", to_host(dv), reference.dv, kv_ld, kv_width);
}

TEST(TiledAttention, ChunkPairsMergedEqualTheWholeSequence) { expect_chunk_pairs_match_whole_sequence(false); }

TEST(TiledAttention, ChunkPairsMergedEqualTheWholeSequenceWithDocuments) {
  expect_chunk_pairs_match_whole_sequence(true);
}

// What the tiled kernel keeps is linear in T: one log-sum-exp per (sequence, head, position), and
// its scratch does not grow with T² either: two [heads, query tile, key tile] tiles (128 × 512 on the
// CPU build, 1024 × 1024 on the GPU build) and a statistic per (sequence, head, position).
TEST(TiledAttention, SavesOneValuePerRowAndScratchLinearInT) {
  const AttentionShape shape{2, 4096, 12, 4, 64, 0, 0, 0, AttentionKernel::tiled};
  EXPECT_EQ(attention_saved_floats(shape), 2u * 12 * 4096);
  const std::size_t tile = std::size_t{kAttentionQueryTile} * kAttentionKeyTile;
  EXPECT_EQ(attention_scratch_floats(shape), 12u * 2 * tile + 2u * 12 * 4096);
  AttentionShape explicit_shape = shape;
  explicit_shape.kernel = AttentionKernel::explicit_probabilities;
  EXPECT_EQ(attention_saved_floats(explicit_shape), 2u * 12 * 4096 * 4096);
}

}  // namespace
}  // namespace trident
