// The tiled (flash-style) attention kernel. Per sequence and group of heads, queries and keys are
// cut into tiles (attention.hpp's query and key tiles). Forward walks each query tile's key tiles
// left to right (the causal mask leaves out those past the diagonal), keeping per row the running
// maximum m and sum l of an online softmax: each tile's scores S = scale·Q_i·K_jᵀ become exp(S − m) and
// are multiplied into the output, which is rescaled whenever m grows; at the end the output is
// divided by l and only lse = m + log l is saved. Backward recomputes every tile's probabilities
// from lse, P = exp(S − lse), and accumulates dV, dK (over query tiles) and dQ (over key tiles),
// with D = rowsum(dO ∘ O) standing for the softmax's Σ P·dP. Products go through gemm(), the
// per-row work through Kokkos row kernels, as the explicit kernel's do. Under packed documents a
// row's keys also start at its document's start, and a query tile skips the key tiles wholly before
// its first row's document (document_mask.hpp: starts never decrease, so that row's is the least).
#include <algorithm>
#include <cfloat>

#include "kernels/attention_heads.hpp"
#include "kernels/math.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

using namespace attention_detail;

namespace {

// Positions [first, first + size) of tile `index` of `tile` positions, cut short at `end`.
struct Span {
  int first, size;
  Span(int tile, int index, int end) : first(index * tile), size(std::min(tile, end - index * tile)) {}
  int end() const { return first + size; }
};

// Tiles of `tile` positions that cover [0, length).
int tiles_over(int length, int tile) { return (length + tile - 1) / tile; }

int query_tile_count(const AttentionShape& s) { return tiles_over(s.T, attention_query_tile(s)); }
int key_tile_count(const AttentionShape& s) { return tiles_over(s.T, attention_key_tile(s)); }

// Key k (local) is visible to query t (local) when k <= t + shift: the chunks' offset.
int key_shift(const AttentionShape& s) { return s.query_offset - s.key_offset; }

// The keys query tile i sees at most (the causal mask's edge at its last row): [0, end).
int causal_key_end(const AttentionShape& s, int i) {
  return std::clamp(Span(attention_query_tile(s), i, s.T).end() + key_shift(s), 0, s.T);
}

// The key tiles that query tile i sees: those starting before its last position.
int key_tiles_seen_by(const AttentionShape& s, int i) {
  return tiles_over(causal_key_end(s, i), attention_key_tile(s));
}

// The first query tile that sees key tile j: the first whose last row reaches the tile's start.
int first_query_tile_seeing(const AttentionShape& s, int j) {
  return std::max(0, j * attention_key_tile(s) - key_shift(s)) / attention_query_tile(s);
}

// Where sequence b's document starts for query position t, on the host (0 without documents).
int host_start(const AttentionShape& s, int b, int t) {
  return s.documents ? s.documents.host_starts[static_cast<long>(b) * s.T + t] : 0;
}

// The first key tile that query tile i of sequence b sees: the one holding its first row's
// document start (starts are positions of the whole sequence, keys start at key_offset). A query
// tile of a chunk pair may see no key at all (its documents start after the keys): it then runs
// its last key tile, every row masked, which gives its rows out 0 (finish_rows).
int first_key_tile_seen_by(const AttentionShape& s, int b, int i) {
  const int first = std::max(0, host_start(s, b, i * attention_query_tile(s)) - s.key_offset) / attention_key_tile(s);
  return std::min(first, key_tiles_seen_by(s, i) - 1);
}

// The last query tile of sequence b that sees key tile j: the last whose first row's document
// starts before the key tile ends.
int last_query_tile_seeing(const AttentionShape& s, int b, int j) {
  const int key_end = s.key_offset + std::min((j + 1) * attention_key_tile(s), s.T);
  int i = query_tile_count(s) - 1;
  while (i > first_query_tile_seeing(s, j) && host_start(s, b, i * attention_query_tile(s)) >= key_end) --i;
  return i;
}

// One query tile against one key tile, for the heads of a group: the rows of a [heads, query
// tile, key tile] block of scores and where each row's head and position read and write. Captured
// by value in the row kernels.
struct TilePair {
  float* tile;  // [heads, query tile, ld]: scores, then probabilities
  long head_stride;
  int heads, ld, queries, keys, query_first, key_first, T;
  int shift, key_offset;       // key_shift(), and the keys' first position in the sequence
  const std::int32_t* starts;  // the sequence's document starts, or null
  KOKKOS_INLINE_FUNCTION int head(int row) const { return row / queries; }
  KOKKOS_INLINE_FUNCTION int position(int row) const { return query_first + row % queries; }
  KOKKOS_INLINE_FUNCTION float* row_of(float* block, int row) const {
    return block + head(row) * head_stride + static_cast<long>(row % queries) * ld;
  }
  // Keys of the tile that the row's query sees: [first_visible, visible), the causal mask's end and
  // the document's start. Empty for a row whose document starts after the tile.
  KOKKOS_INLINE_FUNCTION int visible(int row) const {
    const int last = position(row) + shift - key_first + 1;
    return last < keys ? (last > 0 ? last : 0) : keys;
  }
  KOKKOS_INLINE_FUNCTION int first_visible(int row) const {
    const int first = starts ? starts[position(row)] - key_offset - key_first : 0;
    const int end = visible(row);
    return first < 0 ? 0 : first < end ? first : end;
  }
  // Index of the row's statistic in per-(head, position) arrays of the group.
  KOKKOS_INLINE_FUNCTION long statistic(int row) const { return static_cast<long>(head(row)) * T + position(row); }
  double elements() const { return static_cast<double>(heads) * queries * keys; }  // of the tile
};

// Query tile i against key tile j, which stops at the query tile's last position.
TilePair tile_pair(const AttentionShape& s, const HeadBatches& batches, const Group& at, float* tile, int i, int j) {
  const Span queries(attention_query_tile(s), i, s.T), keys(attention_key_tile(s), j, causal_key_end(s, i));
  const long head_stride = attention_tile_floats(s);
  const std::int32_t* starts = s.documents ? s.documents.starts + static_cast<long>(at.sequence) * s.T : nullptr;
  return {tile,       head_stride, batches.per_group, attention_key_tile(s), queries.size, keys.size, queries.first,
          keys.first, s.T,         key_shift(s),      s.key_offset,          starts};
}

// tile = scale·Q_i·K_jᵀ for each head of the group.
void score_tile(GemmContext& context, const AttentionShape& s, const HeadBatches& batches, const Group& at,
                const TilePair& pair, const float* q, const float* k) {
  gemm_strided_batched(context, false, true, pair.queries, pair.keys, s.head_dim, score_scale(s),
                       q + at.q + pair.query_first * s.q_ld, s.q_ld, s.head_dim, k + at.kv + pair.key_first * s.kv_ld,
                       s.kv_ld, batches.kv_stride, 0.0f, pair.tile, pair.ld, pair.head_stride, batches.per_group);
}

// The online softmax's step for one key tile: scores become exp(S − m_new), masked ones 0; the
// running max (kept in lse) and sum update, and the output rows accumulated so far are rescaled by
// exp(m_old − m_new). The first key tile starts them.
void online_softmax_step(const TilePair& pair, bool first, float* out, long out_ld, int head_dim, float* running_max,
                         float* running_sum) {
  const double rows = static_cast<double>(pair.heads) * pair.queries, output = first ? 0.0 : rows * head_dim;
  declare_kernel_cost(KernelCost::of_floats(pair.elements() + output + 2.0 * rows, pair.elements() + output + 2.0 * rows,
                                            4.0 * pair.elements() + output));
  for_each_row(
      "tiled_attention_online_softmax", pair.heads * pair.queries, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        float* row = pair.row_of(pair.tile, r);
        const int visible = pair.visible(r), from = pair.first_visible(r);
        const long at = pair.statistic(r);
        const float old_max = first ? -FLT_MAX : running_max[at];
        float* seen = row + from;
        const float tile_max = row_max(team, visible - from, [&](int j) { return seen[j]; });
        const float new_max = tile_max > old_max ? tile_max : old_max;
        const float sum =
            row_sum(team, visible - from, [&](int j) { return seen[j] = math::fast_exp(seen[j] - new_max); });
        row_for(team, 0, from, [&](int j) { row[j] = 0.0f; });
        row_for(team, visible, pair.keys, [&](int j) { row[j] = 0.0f; });
        const float correction = first ? 0.0f : math::fast_exp(old_max - new_max);
        if (!first) {
          float* o = out + pair.position(r) * out_ld + static_cast<long>(pair.head(r)) * head_dim;
          row_for(team, 0, head_dim, [&](int d) { o[d] *= correction; });
        }
        once_per_row(team, [&] {
          running_max[at] = new_max;
          running_sum[at] = first ? sum : running_sum[at] * correction + sum;
        });
      });
}

// out rows /= l; lse = m + log l, for the group's heads × T rows. A row that saw no key (a chunk
// pair's query whose document starts after the keys) keeps out = 0 and lse = −FLT_MAX, which
// attention_merge weighs as nothing.
void finish_rows(float* out, long out_ld, int head_dim, int rows, int T, float* log_sum_exp, const float* running_sum) {
  const double output = static_cast<double>(rows) * head_dim;
  declare_kernel_cost(KernelCost::of_floats(output + 2.0 * rows, output + rows, output + 2.0 * rows));
  for_each_row(
      "tiled_attention_finish", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        const float sum = running_sum[r];
        const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
        float* o = out + (r % T) * out_ld + static_cast<long>(r / T) * head_dim;
        row_for(team, 0, head_dim, [&](int d) { o[d] *= inverse; });
        once_per_row(team, [&] {
          if (sum > 0.0f) log_sum_exp[r] += math::log(sum);
        });
      });
}

// D = rowsum(dO ∘ O) for the group's heads × T rows.
void output_dots(const float* dout, const float* out, long out_ld, int head_dim, int rows, int T, float* dots) {
  const double output = static_cast<double>(rows) * head_dim;
  declare_kernel_cost(KernelCost::of_floats(2.0 * output, rows, 2.0 * output));
  for_each_row(
      "tiled_attention_output_dots", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        const long first = (r % T) * out_ld + static_cast<long>(r / T) * head_dim;
        const float dot = row_sum(team, head_dim, [&](int d) { return dout[first + d] * out[first + d]; });
        once_per_row(team, [&] { dots[r] = dot; });
      });
}

// Scores become the probabilities exp(S − lse), masked ones 0.
void tile_probabilities(const TilePair& pair, const float* log_sum_exp) {
  const double rows = static_cast<double>(pair.heads) * pair.queries;
  declare_kernel_cost(KernelCost::of_floats(pair.elements() + rows, pair.elements(), 2.0 * pair.elements()));
  for_each_row(
      "tiled_attention_probabilities", pair.heads * pair.queries, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        float* row = pair.row_of(pair.tile, r);
        const int visible = pair.visible(r), from = pair.first_visible(r);
        const float lse = log_sum_exp[pair.statistic(r)];
        row_for(team, from, visible, [&](int j) { row[j] = math::fast_exp(row[j] - lse); });
        row_for(team, 0, from, [&](int j) { row[j] = 0.0f; });
        row_for(team, visible, pair.keys, [&](int j) { row[j] = 0.0f; });
      });
}

// dprobs (dP on entry) becomes dS = P ∘ (dP − D), masked ones 0.
void tile_score_grads(const TilePair& pair, float* dprobs, const float* dots) {
  const double rows = static_cast<double>(pair.heads) * pair.queries;
  declare_kernel_cost(KernelCost::of_floats(2.0 * pair.elements() + rows, pair.elements(), 2.0 * pair.elements()));
  for_each_row(
      "tiled_attention_score_grads", pair.heads * pair.queries, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        const float* p = pair.row_of(pair.tile, r);
        float* d = pair.row_of(dprobs, r);
        const int visible = pair.visible(r), from = pair.first_visible(r);
        const float dot = dots[pair.statistic(r)];
        row_for(team, from, visible, [&](int j) { d[j] = p[j] * (d[j] - dot); });
        row_for(team, 0, from, [&](int j) { d[j] = 0.0f; });
        row_for(team, visible, pair.keys, [&](int j) { d[j] = 0.0f; });
      });
}

// Scratch: the tile of scores (probabilities), the tile of their gradients, a statistic per row.
struct Scratch {
  float *tile, *grads, *rows;
  Scratch(const AttentionShape& s, float* base)
      : tile(base), grads(base + s.heads * attention_tile_floats(s)), rows(row_statistics(base, s)) {}
};

}  // namespace

namespace attention_detail {

void tiled_forward(GemmContext& context, float* out, float* log_sum_exp, float* scratch, const float* q, const float* k,
                   const float* v, const AttentionShape& s) {
  const HeadBatches batches(s);
  const Scratch work(s, scratch);
  const int query_tiles = query_tile_count(s), hd = s.head_dim, n = batches.per_group;
  for_each_group(s, batches, [&](const Group& at) {
    float* running_max = log_sum_exp + at.head * s.T;
    for (int i = 0; i < query_tiles; ++i) {
      const int first = first_key_tile_seen_by(s, at.sequence, i);
      for (int j = first; j < key_tiles_seen_by(s, i); ++j) {
        const TilePair pair = tile_pair(s, batches, at, work.tile, i, j);
        score_tile(context, s, batches, at, pair, q, k);
        online_softmax_step(pair, j == first, out + at.out, s.out_ld, hd, running_max, work.rows);
        gemm_strided_batched(context, false, false, pair.queries, hd, pair.keys, 1.0f, pair.tile, pair.ld,
                             pair.head_stride, v + at.kv + pair.key_first * s.kv_ld, s.kv_ld, batches.kv_stride,
                             j == first ? 0.0f : 1.0f, out + at.out + pair.query_first * s.out_ld, s.out_ld, hd,
                             n);  // O += P·V_j
      }
    }
    finish_rows(out + at.out, s.out_ld, hd, n * s.T, s.T, running_max, work.rows);
  });
}

void tiled_backward(GemmContext& context, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                    const float* q, const float* k, const float* v, const float* out, const float* log_sum_exp,
                    const AttentionShape& s) {
  const HeadBatches batches(s);
  const Scratch work(s, scratch);
  const int hd = s.head_dim, n = batches.per_group;
  const float scale = score_scale(s);
  for_each_group(s, batches, [&](const Group& at) {
    output_dots(dout + at.out, out + at.out, s.out_ld, hd, n * s.T, s.T, work.rows);
    for (int j = 0; j < key_tile_count(s); ++j) {
      // The last query tile that sees it first: it sees the whole key tile, so its products start
      // dK_j and dV_j.
      const int last = last_query_tile_seeing(s, at.sequence, j);
      for (int i = last; i >= first_query_tile_seeing(s, j); --i) {
        const TilePair pair = tile_pair(s, batches, at, work.tile, i, j);
        const long block = pair.head_stride;
        const bool starts_kv = i == last && !s.accumulate_grads;
        const float* dout_i = dout + at.out + pair.query_first * s.out_ld;
        const float* q_i = q + at.q + pair.query_first * s.q_ld;
        const long kv_j = at.kv + pair.key_first * s.kv_ld;
        score_tile(context, s, batches, at, pair, q, k);
        tile_probabilities(pair, log_sum_exp + at.head * s.T);
        sum_over_group(context, s, batches, pair.queries, pair.keys, 1.0f, pair.tile, pair.ld, block, dout_i, s.out_ld,
                       starts_kv, dv + kv_j);  // dV_j += Σ Pᵀ·dO_i
        gemm_strided_batched(context, false, true, pair.queries, pair.keys, hd, 1.0f, dout_i, s.out_ld, hd, v + kv_j,
                             s.kv_ld, batches.kv_stride, 0.0f, work.grads, pair.ld, block, n);  // dP = dO_i·V_jᵀ
        tile_score_grads(pair, work.grads, work.rows);
        const bool starts_q = j == first_key_tile_seen_by(s, at.sequence, i) && !s.accumulate_grads;
        gemm_strided_batched(context, false, false, pair.queries, hd, pair.keys, scale, work.grads, pair.ld, block,
                             k + kv_j, s.kv_ld, batches.kv_stride, starts_q ? 0.0f : 1.0f,
                             dq + at.q + pair.query_first * s.q_ld, s.q_ld, hd, n);  // dQ_i += scale·dS·K_j
        sum_over_group(context, s, batches, pair.queries, pair.keys, scale, work.grads, pair.ld, block, q_i, s.q_ld,
                       starts_kv, dk + kv_j);  // dK_j += scale·Σ dSᵀ·Q_i
      }
    }
  });
}

}  // namespace attention_detail

// Per (sequence, head, position) row: lse = log(e^lse + e^lse'), out = (e^lse·out + e^lse'·out') / e^lse
// (computed from the larger of the two, so that neither exponential overflows).
void attention_merge(float* out, float* log_sum_exp, const float* part, const float* part_log_sum_exp,
                     const AttentionShape& s) {
  const int rows = s.B * s.heads * s.T, T = s.T, heads = s.heads, hd = s.head_dim;
  const long out_ld = s.out_ld;
  const double output = static_cast<double>(rows) * hd;
  declare_kernel_cost(KernelCost::of_floats(2.0 * output + 2.0 * rows, output + rows, 4.0 * output));
  for_each_row(
      "attention_merge", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        const int t = r % T, head = (r / T) % heads, b = r / T / heads;
        const long first = (static_cast<long>(b) * T + t) * out_ld + static_cast<long>(head) * hd;
        const float mine = log_sum_exp[r], theirs = part_log_sum_exp[r];
        // The larger as a row reduction: every lane has read log_sum_exp[r] before one writes it.
        const float largest = row_max(team, 1, [&](int) { return mine > theirs ? mine : theirs; });
        const float keep = math::fast_exp(mine - largest), add = math::fast_exp(theirs - largest);
        const float inverse = 1.0f / (keep + add);
        row_for(team, 0, hd,
                [&](int d) { out[first + d] = (keep * out[first + d] + add * part[first + d]) * inverse; });
        once_per_row(team, [&] { log_sum_exp[r] = largest + math::log(keep + add); });
      });
}

}  // namespace trident
