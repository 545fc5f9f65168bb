// The sparse op on the CPU as compiled loops: attention of every query over its key slots.
//
// Layout: q, out, dout (B, H, T, D) and k, v (B, KV, T, D), one accumulation type (float or
// double), each with the strides it comes with (channels contiguous): the model's (B, T, h, D)
// views are read as they are, and out and dq come back laid out as q (dense) or
// position-major. Slots of query t (the Python side resolves them against T):
//   absolute keys  block_keys[t / block_size][a] (BigBird), valid when key >= 0 and
//                  t - key >= min_abs;
//   exact          distances d, valid when t >= d;
//   rungs          (lo, frac): the virtual row (1 - frac) row[t - lo] + frac row[max(t - lo - 1, 0)],
//                  valid when t >= lo (every rung passed here is used).
// Slot order in P and dS: [absolute | exact | rungs].
//
// Work is split into items of (batch, KV head, block of positions) taken from a shared
// counter by every thread (dynamic scheduling): a thread that the OS deschedules, because a
// core is busy with another process, holds up at most one small item, never a fixed share.
// The G query heads of a KV group are one item, so every key row (and a rung's blended row)
// is read once for the group. Every sum runs in a fixed order, whatever thread computes it:
// results are bit-identical from run to run.
//
// Vectorised with ATen's at::vec for the instruction set the compiler targets (-march=native:
// AVX-512 or AVX2 with FMA where the CPU has them, ATen's portable loops elsewhere). The
// forward and the backward's query pass take a vector of L consecutive queries (one a lane)
// and a tile of the group's heads at once: the keys a vector reads at one distance are
// consecutive, so with k and v copied channel-major each slot's keys are one load per
// channel, shared by the tile's heads, and scores, softmax and outputs are lane-wise
// multiply-adds in registers (small dense products, no horizontal sum per dot product); the
// forward hands its channel-major k and v to the backward. The key pass takes a block of key
// rows at once: over a band of consecutive distances (the window) the queries that read the
// block are one run of rows, each loaded once for every key row it reaches (a band product,
// the block's dK or dV sums in registers).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#elif defined(__AVX2__) && defined(__FMA__)
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#else
#define CPU_CAPABILITY DEFAULT
#define CPU_CAPABILITY_DEFAULT
#endif
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/extension.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kItem = 64;  // queries per work item of the forward and the query pass
constexpr int64_t kKeys = 16;  // key rows per work item of the key pass (a multiple of 4)

template <typename F>
void parallel_items(int64_t n, int64_t threads, const F& fn) {
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  threads = std::max<int64_t>(1, std::min(threads, n));
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int64_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
}

template <typename T>
using Vec = at::vec::Vectorized<T>;

// Lanes [0, min(n, Vec::size())) of x; the rest are zero. at::vec's loadu takes a count of at
// most size(): past it, AVX-512 builds a lane mask with 1 << count (64 lanes or more gave an
// empty mask: zeros) and AVX2 copies count elements into a buffer of size() (an overflow).
template <typename T>
inline Vec<T> load(const T* x, int64_t n) {
  return Vec<T>::loadu(x, std::min<int64_t>(n, Vec<T>::size()));
}

// x, kept in a register: GCC folds a vector that several multiply-adds use into each of them
// as a memory operand, one load per use (measured: the output mix was bound by those loads).
template <typename T>
inline Vec<T> held(Vec<T> x) {
#if defined(CPU_CAPABILITY_AVX512)
  using Raw = std::conditional_t<std::is_same_v<T, float>, __m512, __m512d>;
#elif defined(CPU_CAPABILITY_AVX2)
  using Raw = std::conditional_t<std::is_same_v<T, float>, __m256, __m256d>;
#endif
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  Raw raw = x;
  asm("" : "+v"(raw));
  return Vec<T>(raw);
#else
  return x;
#endif
}

template <typename T>
inline T lane_sum(const Vec<T>& x) {
  return at::vec::vec_reduce_all<T>([](Vec<T>& a, Vec<T>& b) { return a + b; }, x);
}

template <typename T>
inline T dot(const T* a, const T* b, int64_t n) {
  constexpr int64_t W = Vec<T>::size();
  Vec<T> acc(T(0));
  for (int64_t i = 0; i < n; i += W) {
    acc = at::vec::fmadd(load(a + i, n - i), load(b + i, n - i), acc);
  }
  return lane_sum(acc);
}

// p[j] = exp(p[j] - max) / sum for a row of n scores (-inf: an invalid slot, 0 after).
template <typename T>
inline void softmax_row(T* p, int64_t n) {
  constexpr int64_t W = Vec<T>::size();
  T top = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) top = std::max(top, p[j]);
  if (top == -std::numeric_limits<T>::infinity()) {  // no valid slot
    std::fill(p, p + n, T(0));
    return;
  }
  const Vec<T> shift(top);
  for (int64_t j = 0; j < n; j += W) (load(p + j, n - j) - shift).exp().store(p + j, std::min(W, n - j));
  T total = 0;
  for (int64_t j = 0; j < n; ++j) total += p[j];
  const Vec<T> inv(T(1) / total);
  for (int64_t j = 0; j < n; j += W) (load(p + j, n - j) * inv).store(p + j, std::min(W, n - j));
}

struct Shape {
  int64_t B, T, H, KV, G, D, A, M, R, S, block_size, min_abs, n_blocks;
  int64_t Tq;  // positions per row of P and dS: T rounded up to whole vectors
};

struct Slots {
  const int64_t* exact;       // (M,)
  const int64_t* lo;          // (R,)
  const double* frac;         // (R,)
  const int64_t* block_keys;  // (n_blocks, A)
};

constexpr int64_t kRowAlign = 16;  // a multiple of every vector's lanes (float or double)

Shape shape_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& exact,
               const torch::Tensor& lo, const torch::Tensor& block_keys, int64_t block_size,
               int64_t min_abs) {
  Shape s;
  s.B = q.size(0);
  s.H = q.size(1);
  s.T = q.size(2);
  s.D = q.size(3);
  s.KV = k.size(1);
  s.G = s.H / s.KV;
  s.M = exact.numel();
  s.R = lo.numel();
  s.A = block_keys.numel() ? block_keys.size(1) : 0;
  s.n_blocks = block_keys.numel() ? block_keys.size(0) : 0;
  s.S = s.A + s.M + s.R;
  s.block_size = std::max<int64_t>(1, block_size);
  s.min_abs = min_abs;
  s.Tq = (s.T + kRowAlign - 1) / kRowAlign * kRowAlign;
  return s;
}

Slots slots_of(const torch::Tensor& exact, const torch::Tensor& lo, const torch::Tensor& frac,
               const torch::Tensor& block_keys) {
  return {exact.data_ptr<int64_t>(), lo.data_ptr<int64_t>(), frac.data_ptr<double>(),
          block_keys.numel() ? block_keys.data_ptr<int64_t>() : nullptr};
}

// Rows of a (B, heads, T, D) tensor with any strides, channels contiguous.
template <typename T>
struct Rows {
  T* base;
  int64_t sb, sh, st;
  T* at(int64_t b, int64_t t, int64_t h) const { return base + b * sb + t * st + h * sh; }
};

template <typename T>
Rows<T> rows_of(const torch::Tensor& x) {
  return {x.data_ptr<std::remove_const_t<T>>(), x.stride(0), x.stride(1), x.stride(2)};
}

// P and dS come in blocks of L consecutive queries, (B, KV, Tq / L, S, G, L): one vector holds a
// slot's values for a head and the block's queries, and a block's S x G vectors are
// contiguous. The query-side passes write and read each block in order; the key pass reads a
// query's weights of every slot and head from one block, not from S x G rows of Tq (rows that
// were more streams than the hardware prefetcher follows: their loads were a sixth of the key
// pass, and the forward's stores S x G streams). Stride between blocks: S * G * L.
template <typename T>
inline int64_t block_of(const Shape& s, int64_t t) {
  constexpr int64_t L = Vec<T>::size();
  return static_cast<int64_t>(static_cast<uint64_t>(t) / L) * s.S * s.G * L + t % L;
}

// The value of query t (t0 a multiple of L: its whole vector), slot `slot`, head h0 + g of
// KV head kv's group.
template <typename T>
inline int64_t prob_index(const Shape& s, int64_t b, int64_t kv, int64_t slot, int64_t g, int64_t t) {
  constexpr int64_t L = Vec<T>::size();
  return (b * s.KV + kv) * s.S * s.G * s.Tq + block_of<T>(s, t) + (slot * s.G + g) * L;
}

// ------------------------------------------------------------------------------ layouts
// The query-side passes take a vector of L consecutive queries at once, one query a lane:
// scores, softmax and outputs are lane-wise, so no dot product ends in a horizontal sum. For
// that k and v are copied channel-major, (B, KV, D, P): channel i of a head is one row with
// position t at column L + t, so the keys a vector of queries reads at distance d are one
// load at column L + t0 - d, shared by the group's heads. Column L - 1 repeats position 0 (a
// rung's upper tap at its first row reads row 0); the other columns before L and past T are 0.
template <typename T>
int64_t channel_stride(int64_t length) {
  constexpr int64_t L = Vec<T>::size();
  int64_t p = L + (length + L - 1) / L * L + L;
  // an odd number of cache lines: a load's D channel rows fall into different cache sets
  // (a stride of a multiple of 4 KB put them all in one)
  while ((p * int64_t(sizeof(T)) / 64) % 2 == 0) p += L;
  return p;
}

template <typename T>
void to_channels(const Shape& s, const Rows<const T>& x, T* xt, int64_t P, int64_t threads) {
  constexpr int64_t L = Vec<T>::size();
  parallel_items(s.B * s.KV, threads, [&](int64_t item) {
    const int64_t b = item / s.KV, h = item % s.KV;
    T* base = xt + item * s.D * P;
    at::vec::transpose_mxn<T>(x.at(b, 0, h), x.st, base + L, P, s.T, s.D);
    for (int64_t i = 0; i < s.D; ++i) {
      T* row = base + i * P;
      std::fill(row, row + L - 1, T(0));
      std::fill(row + L + s.T, row + P, T(0));
      row[L - 1] = row[L];
    }
  });
}

// n positions from row x of `heads` heads of D channels -> lanes: out[(g * D + i) * L + lane],
// lanes past n zero; and back.
template <typename T>
void to_lanes(const Rows<const T>& x, const T* first, int64_t n, int64_t heads, int64_t D, T* out) {
  constexpr int64_t L = Vec<T>::size();
  if (n < L) std::fill(out, out + heads * D * L, T(0));
  for (int64_t g = 0; g < heads; ++g) at::vec::transpose_mxn<T>(first + g * x.sh, x.st, out + g * D * L, L, n, D);
}

template <typename T>
void from_lanes(const T* x, int64_t heads, int64_t D, int64_t n, const Rows<T>& out, T* first) {
  constexpr int64_t L = Vec<T>::size();
  for (int64_t g = 0; g < heads; ++g) at::vec::transpose_mxn<T>(x + g * D * L, L, first + g * out.sh, out.st, D, n);
}

// ------------------------------------------------------------------------------ slot sources
// What slot j reads at channel i, a vector over the L queries: a shifted load of a
// channel-major row (exact distances: column col[j]), a rung's blend of two of them (upper tap
// one column left), the difference of its taps, or one row-major key broadcast (absolute keys).
// `ahead` asks for the line the same load reads two vectors of queries later, into L2: a
// slot's D channel rows are D streams, too many for the hardware prefetcher, and far rungs'
// rows come from L3 (measured at 4k: the forward 1.4x slower per query than at 512 without).
template <typename T>
inline void prefetch_ahead(const T* x) {
  __builtin_prefetch(x + 3 * Vec<T>::size() - 1, 0, 2);
}

template <typename T>
struct Shifted {
  const T* base;  // channel 0, position 0
  const int64_t* col;
  int64_t P;
  Vec<T> operator()(int64_t j, int64_t i) const { return Vec<T>::loadu(base + col[j] + i * P); }
  void ahead(int64_t j, int64_t i) const { prefetch_ahead(base + col[j] + i * P); }
};

template <typename T>
struct Blended {
  const T* base;
  const int64_t* col;
  const T* frac;
  int64_t P;
  Vec<T> operator()(int64_t j, int64_t i) const {
    const T* x = base + col[j] + i * P;
    const Vec<T> lo = Vec<T>::loadu(x);
    return at::vec::fmadd(Vec<T>(frac[j]), Vec<T>::loadu(x - 1) - lo, lo);
  }
  void ahead(int64_t j, int64_t i) const { prefetch_ahead(base + col[j] + i * P); }
};

template <typename T>
struct TapDiff {
  const T* base;
  const int64_t* col;
  int64_t P;
  Vec<T> operator()(int64_t j, int64_t i) const {
    const T* x = base + col[j] + i * P;
    return Vec<T>::loadu(x - 1) - Vec<T>::loadu(x);
  }
  void ahead(int64_t j, int64_t i) const { prefetch_ahead(base + col[j] + i * P); }
};

// Absolute keys of one vector of queries: slot `slot` reads row `key` for queries [first, end).
// A vector that spans two of BigBird's blocks has an entry per block.
struct Entry {
  int64_t slot, key, first, end;
};

template <typename T>
struct Broadcast {
  const T* rows;  // one head's keys or values: position t, channel i at t * row_stride + i * channel_stride
  const Entry* entries;
  int64_t row_stride, channel_stride;
  Vec<T> operator()(int64_t j, int64_t i) const {
    return Vec<T>(rows[entries[j].key * row_stride + i * channel_stride]);
  }
  void ahead(int64_t, int64_t) const {}
};

// out[g][j] (vectors at out + g * g_stride + j * L) = sum_i a[g][i] x_j(i) for j < n: kG rows of
// lanes a (D vectors each) against n sources, J at a time, so that each a vector is loaded once
// for J sources and each source vector once for kG rows. Every sum runs over i in order.
template <typename T, int kG, typename Src>
void dots(const T* a, int64_t D, const Src& x, int64_t n, T* out, int64_t g_stride) {
  constexpr int64_t L = Vec<T>::size();
  constexpr int J = kG == 1 ? 8 : 16 / kG;
  for (int64_t j0 = 0; j0 < n; j0 += J) {
    int64_t js[J];  // a short last tile repeats its last source (its sums are dropped)
    for (int j = 0; j < J; ++j) js[j] = std::min<int64_t>(j0 + j, n - 1);
    Vec<T> acc[kG][J];
    for (int g = 0; g < kG; ++g)
      for (int j = 0; j < J; ++j) acc[g][j] = Vec<T>(T(0));
    for (int64_t i = 0; i < D; ++i) {
      Vec<T> xv[J];
      for (int j = 0; j < J; ++j) {
        xv[j] = x(js[j], i);
        x.ahead(js[j], i);
      }
      for (int g = 0; g < kG; ++g) {
        const Vec<T> av = Vec<T>::loadu(a + (g * D + i) * L);
        for (int j = 0; j < J; ++j) acc[g][j] = at::vec::fmadd(av, xv[j], acc[g][j]);
      }
    }
    for (int g = 0; g < kG; ++g)
      for (int j = 0; j < J && j0 + j < n; ++j) acc[g][j].store(out + g * g_stride + (j0 + j) * L);
  }
}

// acc[g][ii] += sum_j w[g][j] x_j(i0 + ii) for j < n (w vectors at w + g * g_stride + j * j_stride):
// each source vector is loaded once for kG rows, each weight vector once for I channels.
template <typename T, int kG, int I, typename Src>
inline void mix(const T* w, int64_t g_stride, int64_t j_stride, int64_t n, const Src& x, int64_t i0,
                Vec<T> (&acc)[kG][I]) {
  for (int64_t j = 0; j < n; ++j) {
    Vec<T> xv[I];
    for (int ii = 0; ii < I; ++ii) {
      xv[ii] = x(j, i0 + ii);
      x.ahead(j, i0 + ii);
    }
    for (int g = 0; g < kG; ++g) {
      const Vec<T> wv = held(Vec<T>::loadu(w + g * g_stride + j * j_stride));
      for (int ii = 0; ii < I; ++ii) acc[g][ii] = at::vec::fmadd(wv, xv[ii], acc[g][ii]);
    }
  }
}

// fn(std::integral_constant<int, I>, i0) over the D channels: tiles of I, then single channels.
template <int kG, typename F>
void channel_tiles(int64_t D, const F& fn) {
  constexpr int I = kG == 1 ? 8 : 16 / kG;
  int64_t i0 = 0;
  for (; i0 + I <= D; i0 += I) fn(std::integral_constant<int, I>(), i0);
  for (; i0 < D; ++i0) fn(std::integral_constant<int, 1>(), i0);
}

// The slots of the vector of queries [t0, t0 + L): the column each exact slot and rung's lower
// tap reads (t0 - d; when every lane is invalid, clamped so that the loads stay in the left
// padding), and the absolute keys' entries.
template <typename T>
void place(const Shape& s, const Slots& slots, int64_t t0, int64_t* col, std::vector<Entry>& entries) {
  constexpr int64_t L = Vec<T>::size();
  for (int64_t m = 0; m < s.M; ++m) col[m] = std::max(t0 - slots.exact[m], -(L - 1));
  for (int64_t r = 0; r < s.R; ++r) col[s.M + r] = std::max(t0 - slots.lo[r], -(L - 1));
  entries.clear();
  const int64_t end = std::min(s.T, t0 + L);
  for (int64_t blk = t0 / s.block_size; s.A && blk * s.block_size < end; ++blk) {
    const int64_t lo = std::max(t0, blk * s.block_size), hi = std::min(end, (blk + 1) * s.block_size);
    for (int64_t a = 0; a < s.A; ++a) {
      const int64_t key = slots.block_keys[blk * s.A + a];
      const int64_t first = std::max(lo, key + s.min_abs);
      if (key >= 0 && first < hi) entries.push_back({a, key, first, hi});
    }
  }
}

template <typename T>
inline Vec<T> lanes_in(const Vec<T>& pos, int64_t first, int64_t end) {
  return (pos >= Vec<T>(T(first))) & (pos < Vec<T>(T(end)));
}

// Buffers of one work item.
template <typename T>
struct Scratch {
  std::vector<int64_t> col, col_hi;  // (M + R): lower taps; (R): upper taps
  std::vector<T> frac;               // (R,)
  std::vector<Entry> entries;
  std::vector<T> a, b, c, d, e, f;   // vectors of lanes
  Scratch(const Shape& s, const Slots& slots) : col(s.M + s.R), col_hi(s.R), frac(s.R) {
    for (int64_t r = 0; r < s.R; ++r) frac[r] = T(slots.frac[r]);
  }
};

// ------------------------------------------------------------------------------ a block of slots
// What the forward and the backward's query pass share, per vector of L queries and tile of kG
// heads. slot_products: the tile's products with each slot's rows, lane-wise, into
// out[(g * S + j) * L]: the absolute slots' from their entries (`none` in lanes no entry
// covers; each entry's own products also in pe[(g * n_entries + e) * L]) and the first
// n_relative relative slots' from channel-major rows.
template <typename T, int kG>
void slot_products(const Shape& s, const Scratch<T>& w, const T* a, const Broadcast<T>& absolute,
                   const Shifted<T>& relative, int64_t n_relative, const Vec<T>& pos, const Vec<T>& none,
                   T* out, T* pe) {
  constexpr int64_t L = Vec<T>::size();
  const int64_t n_entries = w.entries.size(), S = s.S;
  dots<T, kG>(a, s.D, absolute, n_entries, pe, n_entries * L);
  dots<T, kG>(a, s.D, relative, n_relative, out + s.A * L, S * L);
  for (int g = 0; g < kG; ++g) {
    T* og = out + g * S * L;
    for (int64_t slot = 0; slot < s.A; ++slot) none.store(og + slot * L);
    for (int64_t e = 0; e < n_entries; ++e) {  // a vector over two blocks: one entry each
      const Entry& x = w.entries[e];
      Vec<T>::blendv(Vec<T>::loadu(og + x.slot * L), Vec<T>::loadu(pe + (g * n_entries + e) * L),
                     lanes_in(pos, x.first, x.end))
          .store(og + x.slot * L);
    }
  }
}

// Weights of head g's slots at wg (g's row of S vectors) -> each absolute entry's share of its
// slot's lanes, into pe_g[e * L].
template <typename T>
void entry_shares(const Scratch<T>& w, const Vec<T>& pos, const T* wg, T* pe_g) {
  constexpr int64_t L = Vec<T>::size();
  for (size_t e = 0; e < w.entries.size(); ++e) {
    const Entry& x = w.entries[e];
    Vec<T>::blendv(Vec<T>(T(0)), Vec<T>::loadu(wg + x.slot * L), lanes_in(pos, x.first, x.end))
        .store(pe_g + e * L);
  }
}

// out lanes [(g * D + i) * L] = factor * the sum over the slots of their weights times their rows,
// in slot order [absolute (weights pe, per entry) | exact | rungs (weights at wts + A * L, rows
// channel-major at xt_h, a rung's the blend of its taps)].
template <typename T, int kG>
void mix_slots(const Shape& s, const Scratch<T>& w, const T* pe, const T* wts, const Broadcast<T>& absolute,
               const T* xt_h, int64_t P, T factor, T* out) {
  constexpr int64_t L = Vec<T>::size();
  const int64_t n_entries = w.entries.size(), S = s.S, A = s.A, M = s.M, D = s.D;
  channel_tiles<kG>(D, [&](auto tile, int64_t i0) {
    constexpr int I = decltype(tile)::value;
    Vec<T> acc[kG][I];
    for (int g = 0; g < kG; ++g)
      for (int ii = 0; ii < I; ++ii) acc[g][ii] = Vec<T>(T(0));
    mix<T, kG, I>(pe, n_entries * L, L, n_entries, absolute, i0, acc);
    mix<T, kG, I>(wts + A * L, S * L, L, M, Shifted<T>{xt_h, w.col.data(), P}, i0, acc);
    mix<T, kG, I>(wts + (A + M) * L, S * L, L, s.R, Blended<T>{xt_h, w.col.data() + M, w.frac.data(), P},
                  i0, acc);
    for (int g = 0; g < kG; ++g)
      for (int ii = 0; ii < I; ++ii) (acc[g][ii] * Vec<T>(factor)).store(out + (g * D + i0 + ii) * L);
  });
}

// ------------------------------------------------------------------------------ forward
// Per vector of L queries and tile of kG heads: the scores of every slot as lane vectors (each
// key vector loaded once for the tile), the softmax across slots lane-wise (written to probs),
// and the output, accumulated channel-major and turned back to rows.
template <typename T, int kG>
void forward_impl(const Shape& s, const Slots& slots, const Rows<const T>& q, const Rows<const T>& k,
                  const Rows<const T>& v, const T* kt, const T* vt, int64_t P, const Rows<T>& out,
                  T* probs, int64_t threads) {
  constexpr int64_t L = Vec<T>::size();
  const T scale = T(1) / std::sqrt(T(s.D));
  const Vec<T> neg_inf(-std::numeric_limits<T>::infinity()), zero(T(0));
  const int64_t t_items = (s.T + kItem - 1) / kItem, S = s.S, A = s.A, M = s.M, D = s.D;
  parallel_items(s.B * s.KV * t_items, threads, [&](int64_t item) {
    const int64_t ti = item % t_items, kv = (item / t_items) % s.KV, b = item / t_items / s.KV;
    Scratch<T> w(s, slots);
    std::vector<T>& qt = w.a;  // the tile's queries, lanes
    std::vector<T>& p = w.b;   // scores, then probabilities: p[(g * S + j) * L]
    std::vector<T>& pe = w.c;  // per absolute entry: its scores, then its masked probabilities
    std::vector<T>& ot = w.d;  // the tile's outputs, lanes
    qt.resize(kG * D * L);
    p.resize(kG * S * L);
    ot.resize(kG * D * L);
    const T* k_rows = k.at(b, 0, kv);
    const T* v_rows = v.at(b, 0, kv);
    const T* kt_h = kt + (b * s.KV + kv) * D * P + L;
    const T* vt_h = vt + (b * s.KV + kv) * D * P + L;
    for (int64_t t0 = ti * kItem; t0 < std::min(s.T, (ti + 1) * kItem); t0 += L) {
      const int64_t n = std::min(L, s.T - t0);
      place<T>(s, slots, t0, w.col.data(), w.entries);
      const int64_t n_entries = w.entries.size();
      pe.resize(std::max<int64_t>(1, kG * n_entries * L));
      const Vec<T> pos = Vec<T>::arange(T(t0), T(1));
      for (int64_t g0 = 0; g0 < s.G; g0 += kG) {
        const int64_t h0 = kv * s.G + g0;
        to_lanes(q, q.at(b, t0, h0), n, kG, D, qt.data());
        // scores
        slot_products<T, kG>(s, w, qt.data(), Broadcast<T>{k_rows, w.entries.data(), k.st, 1},
                             Shifted<T>{kt_h, w.col.data(), P}, M, pos, neg_inf, p.data(), pe.data());
        dots<T, kG>(qt.data(), D, Blended<T>{kt_h, w.col.data() + M, w.frac.data(), P}, s.R,
                    &p[(A + M) * L], S * L);
        for (int g = 0; g < kG; ++g) {
          T* pg = &p[g * S * L];
          for (int64_t j = 0; j < S; ++j) {  // relative slots: valid from t = d (or lo) on
            const Vec<T> sc = Vec<T>::loadu(pg + j * L) * Vec<T>(scale);
            if (j < A) {
              sc.store(pg + j * L);
              continue;
            }
            const int64_t d = j < A + M ? slots.exact[j - A] : slots.lo[j - A - M];
            Vec<T>::blendv(neg_inf, sc, pos >= Vec<T>(T(d))).store(pg + j * L);
          }
          // softmax across the slots, lane-wise; a lane without a valid slot gets zeros
          Vec<T> top = neg_inf;
          for (int64_t j = 0; j < S; ++j) top = at::vec::maximum(top, Vec<T>::loadu(pg + j * L));
          top = Vec<T>::blendv(top, zero, top == neg_inf);
          Vec<T> total = zero;
          for (int64_t j = 0; j < S; ++j) {
            const Vec<T> x = (Vec<T>::loadu(pg + j * L) - top).exp();
            x.store(pg + j * L);
            total = total + x;
          }
          const Vec<T> inv = Vec<T>::blendv(Vec<T>(T(1)) / total, zero, total == zero);
          for (int64_t j = 0; j < S; ++j) {
            const Vec<T> x = Vec<T>::loadu(pg + j * L) * inv;
            x.store(pg + j * L);
            x.store(probs + prob_index<T>(s, b, kv, j, g0 + g, t0));
          }
          entry_shares(w, pos, pg, &pe[g * n_entries * L]);
        }
        // outputs: [absolute | exact | rungs], each sum in slot order
        mix_slots<T, kG>(s, w, pe.data(), p.data(), Broadcast<T>{v_rows, w.entries.data(), v.st, 1}, vt_h, P,
                         T(1), ot.data());
        from_lanes(ot.data(), kG, D, n, out, out.at(b, t0, h0));
      }
    }
  });
}

// ------------------------------------------------------------------------------ backward
// Pass 1, per vector of queries and tile of heads, lane-wise as the forward: dP (a rung's from
// its two taps: dout . v_lo and dout . v_hi), dS = P (dP - delta) with delta = sum_j P_j dP_j,
// dQ = scale dS K, and each item's share of d(frac): a rung's score moves by
// scale q . (k_hi - k_lo), its value by v_hi - v_lo. k and v are read channel-major, absolute
// keys too (position t, channel i at i * P + t).
template <typename T, int kG>
void query_pass(const Shape& s, const Slots& slots, const Rows<const T>& q, const T* kt, const T* vt,
                int64_t P, const Rows<const T>& dout, const T* probs, T* ds_all, const Rows<T>& dq,
                T* dfrac_items, int64_t threads) {
  constexpr int64_t L = Vec<T>::size();
  const T scale = T(1) / std::sqrt(T(s.D));
  const Vec<T> zero(T(0));
  const int64_t t_items = (s.T + kItem - 1) / kItem, S = s.S, A = s.A, M = s.M, R = s.R, D = s.D;
  const int64_t GL = s.G * L;  // between a block's slots in P and dS
  parallel_items(s.B * s.KV * t_items, threads, [&](int64_t item) {
    const int64_t ti = item % t_items, kv = (item / t_items) % s.KV, b = item / t_items / s.KV;
    Scratch<T> w(s, slots);
    std::vector<T>& qt = w.a;  // the tile's queries, and its output gradients, lanes
    std::vector<T>& dt = w.b;
    std::vector<T>& ds = w.c;  // dP, then dS: ds[(g * S + j) * L]
    std::vector<T>& taps = w.d;  // per rung: dout . v_hi, then q . (k_hi - k_lo)
    std::vector<T>& pe = w.e;    // per absolute entry: its dP, then its masked dS
    std::vector<T>& dqt = w.f;
    qt.resize(kG * D * L);
    dt.resize(kG * D * L);
    ds.resize(kG * S * L);
    taps.resize(std::max<int64_t>(1, 2 * kG * R * L));
    dqt.resize(kG * D * L);
    std::vector<Vec<T>> dfrac(R, zero);  // lane-wise partial sums, in a fixed order
    const T* kt_h = kt + (b * s.KV + kv) * D * P + L;
    const T* vt_h = vt + (b * s.KV + kv) * D * P + L;
    for (int64_t t0 = ti * kItem; t0 < std::min(s.T, (ti + 1) * kItem); t0 += L) {
      const int64_t n = std::min(L, s.T - t0);
      place<T>(s, slots, t0, w.col.data(), w.entries);
      for (int64_t r = 0; r < R; ++r) w.col_hi[r] = w.col[M + r] - 1;
      const int64_t n_entries = w.entries.size();
      pe.resize(std::max<int64_t>(1, kG * n_entries * L));
      const Vec<T> pos = Vec<T>::arange(T(t0), T(1));
      for (int64_t g0 = 0; g0 < s.G; g0 += kG) {
        const int64_t h0 = kv * s.G + g0;
        to_lanes(q, q.at(b, t0, h0), n, kG, D, qt.data());
        to_lanes(dout, dout.at(b, t0, h0), n, kG, D, dt.data());
        T* v_hi = taps.data();
        T* k_slope = taps.data() + kG * R * L;
        // dP: exact slots and the rungs' lower taps, then their upper taps and d(score)/d(frac)
        slot_products<T, kG>(s, w, dt.data(), Broadcast<T>{vt_h, w.entries.data(), 1, P},
                             Shifted<T>{vt_h, w.col.data(), P}, M + R, pos, zero, ds.data(), pe.data());
        dots<T, kG>(dt.data(), D, Shifted<T>{vt_h, w.col_hi.data(), P}, R, v_hi, R * L);
        dots<T, kG>(qt.data(), D, TapDiff<T>{kt_h, w.col.data() + M, P}, R, k_slope, R * L);
        for (int g = 0; g < kG; ++g) {
          T* dsg = &ds[g * S * L];
          const T* pg = probs + prob_index<T>(s, b, kv, 0, g0 + g, t0);  // slot j's at pg + j * GL
          for (int64_t r = 0; r < R; ++r) {  // a rung's dP from its taps; d(frac)
            const Vec<T> lo = Vec<T>::loadu(dsg + (A + M + r) * L);
            const Vec<T> slope = Vec<T>::loadu(&v_hi[(g * R + r) * L]) - lo;
            at::vec::fmadd(Vec<T>(w.frac[r]), slope, lo).store(dsg + (A + M + r) * L);
            slope.store(&v_hi[(g * R + r) * L]);
          }
          // delta = sum_j P_j dP_j (= dout . out) lane-wise, from what is in hand: reading out's
          // rows and summing D products per query cost a quarter of this pass
          Vec<T> dl = zero;
          for (int64_t j = 0; j < S; ++j) dl = at::vec::fmadd(Vec<T>::loadu(pg + j * GL), Vec<T>::loadu(dsg + j * L), dl);
          T* dsw = ds_all + prob_index<T>(s, b, kv, 0, g0 + g, t0);
          for (int64_t j = 0; j < S; ++j) {
            const Vec<T> x = Vec<T>::loadu(pg + j * GL) * (Vec<T>::loadu(dsg + j * L) - dl);
            x.store(dsg + j * L);
            x.store(dsw + j * GL);
          }
          for (int64_t r = 0; r < R; ++r) {
            const int64_t j = A + M + r;
            const Vec<T> score = Vec<T>::loadu(dsg + j * L) * Vec<T>(scale) * Vec<T>::loadu(&k_slope[(g * R + r) * L]);
            dfrac[r] = dfrac[r] + at::vec::fmadd(Vec<T>::loadu(pg + j * GL), Vec<T>::loadu(&v_hi[(g * R + r) * L]), score);
          }
          entry_shares(w, pos, dsg, &pe[g * n_entries * L]);
        }
        mix_slots<T, kG>(s, w, pe.data(), ds.data(), Broadcast<T>{kt_h, w.entries.data(), 1, P}, kt_h, P,
                         scale, dqt.data());
        from_lanes(dqt.data(), kG, D, n, dq, dq.at(b, t0, h0));
      }
    }
    for (int64_t r = 0; r < R; ++r) dfrac_items[item * R + r] = lane_sum(dfrac[r]);
  });
}

// Pass 2, per block of kKeyRows key rows j: the queries that read row j at a relative tap of
// distance d are j + d (a rung's lower tap at d = lo, weight 1 - frac, its upper tap at lo + 1,
// weight frac; row 0 also takes query lo's upper tap, whose row -1 is row 0), so over a band
// of consecutive distances (the window) a block's readers are one run of query rows, each
// loaded once for every row of the block it reaches: a small band product, dK += dS q and
// dV += P dout, its kKeyRows x C vectors of sums in registers. Absolute keys are added first,
// row by row over the queries of the blocks that drew them (reader_ptr / reader_block /
// reader_slot). Each row's sums run in a fixed order (absolute readers, bands by distance,
// row 0's upper taps), whatever the thread.
constexpr int kKeyRows = 4;
static_assert(kKeys % kKeyRows == 0, "a work item of the key pass holds whole blocks");
constexpr int64_t kBandMin = 3;  // shorter bands go tap by tap (a band wastes its corners)

// Relative taps of consecutive distances d0, d0 + 1, ..., one each: tap i reads the rows of P
// or dS at offset[i] (its slot times G L, see prob_index) with weight weight[i].
template <typename T>
struct Band {
  int64_t d0, span;
  std::vector<int64_t> offset;
  std::vector<T> weight;
};

template <typename T>
std::vector<Band<T>> bands_of(const Shape& s, const Slots& slots) {
  struct Tap {
    int64_t d, slot;
    T weight;
  };
  std::vector<Tap> taps;
  for (int64_t m = 0; m < s.M; ++m) taps.push_back({slots.exact[m], s.A + m, T(1)});
  for (int64_t r = 0; r < s.R; ++r) {
    const T f = T(slots.frac[r]);
    taps.push_back({slots.lo[r], s.A + s.M + r, T(1) - f});
    taps.push_back({slots.lo[r] + 1, s.A + s.M + r, f});
  }
  std::stable_sort(taps.begin(), taps.end(), [](const Tap& a, const Tap& b) { return a.d < b.d; });
  std::vector<Band<T>> bands;
  for (const Tap& tap : taps) {
    if (tap.d >= s.T) continue;  // no query reads it
    if (bands.empty() || tap.d != bands.back().d0 + bands.back().span) bands.push_back({tap.d, 0, {}, {}});
    bands.back().span += 1;
    bands.back().offset.push_back(tap.slot * s.G * Vec<T>::size());
    bands.back().weight.push_back(tap.weight);
  }
  return bands;
}

// A hint for the weights of a slot's G heads kKeys queries on (w: the first head's), which the
// next work item reads: one line per head.
template <typename T>
inline void prefetch_weights(const T* w, int64_t G) {
  for (int64_t g = 0; g < G; ++g) __builtin_prefetch(w + g * Vec<T>::size(), 0, 3);  // a hint: never faults
}

// Rows j0 .. j0 + kKeyRows - 1 of dK (src = dS, x = q, times scale) or dV (src = P, x = dout),
// C vectors of channels from i0 (kFull: all C whole). `init`: the absolute readers' sums, or null.
// kGroup: the heads of a KV group when fixed at compile time (their loops unrolled), else 0.
template <typename T, int C, bool kFull, int kGroup = 0>
void key_block(const Shape& s, const Slots& slots, const std::vector<Band<T>>& bands, const T* src_all,
               const Rows<const T>& x, int64_t b, int64_t kv, int64_t j0, int64_t i0, T scale,
               const T* init, T* weights, const Rows<T>& grad) {
  constexpr int64_t L = Vec<T>::size();
  constexpr int J = kKeyRows;
  const int64_t n = s.D - i0, G = kGroup ? kGroup : s.G, h0 = kv * G;
  // query t's value of head g at src + block_of(t) + offset + g * L (offset: its slot's)
  const T* src = src_all + prob_index<T>(s, b, kv, 0, 0, 0);
  // row t of head g; and a hint for the row kKeys on, which the next work item reads in its
  // place (rows come from L3 at far taps, and a page of the model's layout holds two of them:
  // too short a stream for the hardware's prefetcher)
  auto load_x = [&](int64_t t, int64_t g, Vec<T>(&xv)[C]) {
    const T* row = x.at(b, t, h0 + g) + i0;
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      xv[c] = kFull ? Vec<T>::loadu(row + c * L) : load(row + c * L, n - c * L);
      __builtin_prefetch(row + kKeys * x.st + c * L, 0, 3);  // a hint: never faults
    }
  };
  Vec<T> acc[J][C];
#pragma GCC unroll 8
  for (int jj = 0; jj < J; ++jj)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[jj][c] = init ? Vec<T>::loadu(init + (jj * C + c) * L) : Vec<T>(T(0));
  for (const Band<T>& band : bands) {
    const int64_t span = band.span, d0 = band.d0;
    const int64_t* offset = band.offset.data();
    const T* weight = band.weight.data();
    if (span >= kBandMin) {
      // query rows t = first + r: row jj takes tap r - jj where 0 <= r - jj < span
      const int64_t first = j0 + d0, end = std::min(s.T, first + J + span - 1);
      for (int64_t t = first; t < end; ++t) {
        const int64_t r = t - first;
        const T* src_t = src + block_of<T>(s, t);  // query t's block
        for (int jj = 0; jj < J; ++jj) {  // weights[g * J + jj], 0 outside the band
          const int64_t tap = std::min(std::max<int64_t>(r - jj, 0), span - 1);
          const T w = r - jj >= 0 && r - jj < span ? weight[tap] : T(0);
          for (int64_t g = 0; g < G; ++g) weights[g * J + jj] = src_t[offset[tap] + g * L] * w;
        }
        prefetch_weights(src + block_of<T>(s, t + kKeys) + offset[std::min(r, span - 1)], G);
#pragma GCC unroll 8
        for (int64_t g = 0; g < G; ++g) {
          Vec<T> xv[C];
          load_x(t, g, xv);
#pragma GCC unroll 8
          for (int jj = 0; jj < J; ++jj) {
            const Vec<T> wv(weights[g * J + jj]);
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c) acc[jj][c] = at::vec::fmadd(wv, xv[c], acc[jj][c]);
          }
        }
      }
      continue;
    }
    for (int64_t i = 0; i < span; ++i) {  // tap by tap: row jj reads query j0 + jj + d
      const int64_t d = d0 + i;
      prefetch_weights(src + block_of<T>(s, j0 + d + kKeys) + offset[i], G);
#pragma GCC unroll 8
      for (int jj = 0; jj < J; ++jj) {
        const int64_t t = std::min(j0 + jj + d, s.T - 1);  // past T: weight 0
        const T w = j0 + jj + d < s.T ? weight[i] : T(0);
        const T* at_t = src + block_of<T>(s, t) + offset[i];
#pragma GCC unroll 8
        for (int64_t g = 0; g < G; ++g) {
          Vec<T> xv[C];
          load_x(t, g, xv);
          const Vec<T> wv(at_t[g * L] * w);
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) acc[jj][c] = at::vec::fmadd(wv, xv[c], acc[jj][c]);
        }
      }
    }
  }
  if (j0 == 0) {  // row 0: each rung's upper tap of query lo (its row -1)
    for (int64_t r = 0; r < s.R; ++r) {
      const int64_t t = slots.lo[r], offset = (s.A + s.M + r) * G * L;
      if (t >= s.T) continue;
      for (int64_t g = 0; g < G; ++g) {
        Vec<T> xv[C];
        load_x(t, g, xv);
        const Vec<T> wv(src[block_of<T>(s, t) + offset + g * L] * T(slots.frac[r]));
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[0][c] = at::vec::fmadd(wv, xv[c], acc[0][c]);
      }
    }
  }
#pragma GCC unroll 8
  for (int jj = 0; jj < J; ++jj) {
    if (j0 + jj >= s.T) break;
    T* out = grad.at(b, j0 + jj, kv) + i0;
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const Vec<T> sum = acc[jj][c] * Vec<T>(scale);
      if (kFull) {
        sum.store(out + c * L);
      } else {
        sum.store(out + c * L, std::min<int64_t>(L, n - c * L));
      }
    }
  }
}

// The absolute readers' sums of rows j0 .. j0 + kKeyRows - 1, C vectors of channels from i0,
// into init[(jj * C + c) * L].
template <typename T, int C>
void reader_sums(const Shape& s, const T* src_all, const Rows<const T>& x, const int64_t* reader_ptr,
                 const int64_t* reader_block, const int64_t* reader_slot, int64_t b, int64_t kv,
                 int64_t j0, int64_t i0, T* init) {
  constexpr int64_t L = Vec<T>::size();
  const int64_t n = s.D - i0, G = s.G, h0 = kv * G;
  const T* src = src_all + prob_index<T>(s, b, kv, 0, 0, 0);
  for (int64_t jj = 0; jj < kKeyRows; ++jj) {
    const int64_t j = std::min(j0 + jj, s.T - 1);  // a row past T: its sums are dropped
    Vec<T> sum[C];
    for (int c = 0; c < C; ++c) sum[c] = Vec<T>(T(0));
    for (int64_t e = reader_ptr[j]; e < reader_ptr[j + 1]; ++e) {
      const int64_t first = reader_block[e] * s.block_size, last = std::min(s.T, first + s.block_size);
      const int64_t offset = reader_slot[e] * G * L;
      for (int64_t t = std::max(first, j + s.min_abs); t < last; ++t) {
        for (int64_t g = 0; g < G; ++g) {
          const T* row = x.at(b, t, h0 + g) + i0;
          const Vec<T> wv(src[block_of<T>(s, t) + offset + g * L]);
          for (int c = 0; c < C; ++c) sum[c] = at::vec::fmadd(wv, load(row + c * L, n - c * L), sum[c]);
        }
      }
    }
    for (int c = 0; c < C; ++c) sum[c].store(init + (jj * C + c) * L);
  }
}

template <typename T>
void key_pass(const Shape& s, const Slots& slots, const Rows<const T>& q, const Rows<const T>& dout,
              const T* probs, const T* ds_all, const int64_t* reader_ptr, const int64_t* reader_block,
              const int64_t* reader_slot, const Rows<T>& dk, const Rows<T>& dv, int64_t threads) {
  constexpr int64_t L = Vec<T>::size();
  constexpr int kChunk = 4;  // vectors of channels a block's sums hold
  const std::vector<Band<T>> bands = bands_of<T>(s, slots);
  const T scale = T(1) / std::sqrt(T(s.D));
  const int64_t j_blocks = (s.T + kKeys - 1) / kKeys;
  parallel_items(s.B * s.KV * j_blocks, threads, [&](int64_t item) {
    const int64_t jb = item % j_blocks, kv = (item / j_blocks) % s.KV, b = item / j_blocks / s.KV;
    T init[kKeyRows * kChunk * L];
    std::vector<T> weights(s.G * kKeyRows);
    for (int64_t j0 = jb * kKeys; j0 < std::min(s.T, (jb + 1) * kKeys); j0 += kKeyRows) {
      for (int64_t i0 = 0; i0 < s.D; i0 += kChunk * L) {
        auto both = [&](auto chunk, auto full) {
          constexpr int C = decltype(chunk)::value;
          constexpr bool kFull = decltype(full)::value;
          const T* sums = reader_ptr ? init : nullptr;
          // the paper's group of 4 query heads a KV head, its loops unrolled; any other at run time
          auto block = [&](const T* src, const Rows<const T>& x, T factor, const Rows<T>& grad) {
            if constexpr (kFull) {
              if (s.G == 4) {
                key_block<T, C, kFull, 4>(s, slots, bands, src, x, b, kv, j0, i0, factor, sums, weights.data(), grad);
                return;
              }
            }
            key_block<T, C, kFull>(s, slots, bands, src, x, b, kv, j0, i0, factor, sums, weights.data(), grad);
          };
          if (reader_ptr) reader_sums<T, C>(s, ds_all, q, reader_ptr, reader_block, reader_slot, b, kv, j0, i0, init);
          block(ds_all, q, scale, dk);
          if (reader_ptr) reader_sums<T, C>(s, probs, dout, reader_ptr, reader_block, reader_slot, b, kv, j0, i0, init);
          block(probs, dout, T(1), dv);
        };
        const int64_t left = s.D - i0;
        if (left >= kChunk * L) {
          both(std::integral_constant<int, kChunk>(), std::true_type());
        } else {
          switch ((left + L - 1) / L) {
            case 4: both(std::integral_constant<int, 4>(), std::false_type()); break;
            case 3: both(std::integral_constant<int, 3>(), std::false_type()); break;
            case 2: both(std::integral_constant<int, 2>(), std::false_type()); break;
            default: both(std::integral_constant<int, 1>(), std::false_type()); break;
          }
        }
      }
    }
  });
}

// The largest tile of heads that divides G: 8, 4, 2 or 1 heads share each vector they read.
template <typename F>
void with_tile(int64_t G, const F& fn) {
  if (G % 8 == 0) {
    fn(std::integral_constant<int, 8>());
  } else if (G % 4 == 0) {
    fn(std::integral_constant<int, 4>());
  } else if (G % 2 == 0) {
    fn(std::integral_constant<int, 2>());
  } else {
    fn(std::integral_constant<int, 1>());
  }
}

void check(const torch::Tensor& x, const torch::Tensor& like, const char* name) {
  TORCH_CHECK(x.is_contiguous() && x.device().is_cpu(), name, ": expected a contiguous CPU tensor");
  TORCH_CHECK(x.scalar_type() == like.scalar_type(), name, ": expected ", like.scalar_type());
}

// q, k, v, out, dout: (B, heads, T, D) CPU tensors of q's dtype, channels contiguous, k and v
// (B, KV, T, D) with H a multiple of KV.
void check_rows(const torch::Tensor& x, const torch::Tensor& q, const char* name, bool keys = false) {
  TORCH_CHECK(x.dim() == 4 && x.device().is_cpu() && (x.stride(3) == 1 || x.size(3) <= 1), name,
              ": expected a (B, heads, T, D) CPU tensor with contiguous channels");
  TORCH_CHECK(x.scalar_type() == q.scalar_type(), name, ": expected ", q.scalar_type());
  TORCH_CHECK(x.size(0) == q.size(0) && x.size(2) == q.size(2) && x.size(3) == q.size(3), name,
              ": expected q's B, T and D");
  TORCH_CHECK(keys ? x.size(1) > 0 && q.size(1) % x.size(1) == 0 : x.size(1) == q.size(1), name,
              keys ? ": heads must divide q's" : ": expected q's heads");
}

// Every row the loops read is inside k and v: a negative distance or lo would read past the
// query (t - d > t, up to T - 1 - d), too few blocks of absolute keys past block_keys. The
// Python side refuses such slots first (KeySlots.check); this keeps a direct call safe too.
void check_slots(const Shape& s, const Slots& slots) {
  for (int64_t m = 0; m < s.M; ++m)
    TORCH_CHECK(slots.exact[m] >= 0, "slot distance ", slots.exact[m], " is negative");
  for (int64_t r = 0; r < s.R; ++r)
    TORCH_CHECK(slots.lo[r] >= 0, "rung lo ", slots.lo[r], " is negative");
  if (s.A) {
    TORCH_CHECK(s.min_abs >= 0, "min_abs_distance ", s.min_abs, " is negative");
    TORCH_CHECK(s.n_blocks * s.block_size >= s.T, "block_keys: ", s.n_blocks, " blocks of ",
                s.block_size, " do not cover ", s.T, " positions");
  }
}

// A fresh tensor; when large, on transparent huge pages (madvise, a hint; honoured where
// /sys/kernel/mm/transparent_hugepage/enabled is `always` or `madvise`): a multi-MB tensor is a
// new mapping whose 4 KB pages each fault on first write, on a VM here about 0.4 ms a MB,
// more than the op's own work at 4k (as huge_pages.py does for the sparse-BLAS kernel).
torch::Tensor empty_huge(at::IntArrayRef sizes, const torch::TensorOptions& options) {
  auto x = torch::empty(sizes, options);
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t huge = uintptr_t(2) << 20;
  const uintptr_t at = reinterpret_cast<uintptr_t>(x.data_ptr()), bytes = x.nbytes();
  const uintptr_t start = (at + huge - 1) / huge * huge, stop = (at + bytes) / huge * huge;
  if (bytes >= 2 * huge && stop > start) madvise(reinterpret_cast<void*>(start), stop - start, MADV_HUGEPAGE);
#endif
  return x;
}

// A fresh (B, heads, T, D) tensor laid out as x is where x is dense, else position-major
// ((B, T, heads, D) in memory, the model's layout): outputs and gradients come back in the
// layout their inputs had, and the caller's transposes are views.
torch::Tensor empty_huge_like(const torch::Tensor& x) {
  if (x.is_non_overlapping_and_dense()) return empty_huge({x.numel()}, x.options()).as_strided(x.sizes(), x.strides());
  return empty_huge({x.size(0), x.size(2), x.size(1), x.size(3)}, x.options()).transpose(1, 2);
}

// k and v channel-major (see `channel_stride`), as (B, KV, D, P) tensors.
template <typename T>
std::pair<torch::Tensor, torch::Tensor> channels(const Shape& s, const torch::Tensor& k,
                                                 const torch::Tensor& v, int64_t threads) {
  const int64_t P = channel_stride<T>(s.T);
  auto kt = empty_huge({s.B, s.KV, s.D, P}, k.options());
  auto vt = empty_huge({s.B, s.KV, s.D, P}, v.options());
  to_channels(s, rows_of<const T>(k), kt.data_ptr<T>(), P, threads);
  to_channels(s, rows_of<const T>(v), vt.data_ptr<T>(), P, threads);
  return {kt, vt};
}

}  // namespace

// Returns out (laid out as q), P (B * H * S * Tq values in blocks, see prob_index) and k, v
// channel-major (B, KV, D, P), which the backward reads in their place.
std::vector<torch::Tensor> forward(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                   torch::Tensor exact, torch::Tensor lo, torch::Tensor frac,
                                   torch::Tensor block_keys, int64_t block_size, int64_t min_abs,
                                   int64_t threads) {
  check_rows(q, q, "q");
  check_rows(k, q, "k", true);
  check_rows(v, k, "v", true);
  const Shape s = shape_of(q, k, exact, lo, block_keys, block_size, min_abs);
  const Slots slots = slots_of(exact, lo, frac, block_keys);
  check_slots(s, slots);
  auto out = empty_huge_like(q);
  auto probs = empty_huge({s.B, s.H, s.S, s.Tq}, q.options());
  torch::Tensor kt, vt;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_forward", [&] {
    std::tie(kt, vt) = channels<scalar_t>(s, k, v, threads);
    if (s.T == 0) return;
    with_tile(s.G, [&](auto tile) {
      forward_impl<scalar_t, decltype(tile)::value>(
          s, slots, rows_of<const scalar_t>(q), rows_of<const scalar_t>(k), rows_of<const scalar_t>(v),
          kt.data_ptr<scalar_t>(), vt.data_ptr<scalar_t>(), kt.size(3), rows_of<scalar_t>(out),
          probs.data_ptr<scalar_t>(), threads);
    });
  });
  return {out, probs, kt, vt};
}

// kt, vt: the forward's channel-major k and v; k_contiguous, v_contiguous: whether k and v were
// contiguous (B, KV, T, D) tensors. Returns dq (laid out as q), dk and dv (contiguous where k
// and v were, else position-major) and d(frac) (R,).
std::vector<torch::Tensor> backward(torch::Tensor q, torch::Tensor kt, torch::Tensor vt,
                                    torch::Tensor dout, torch::Tensor probs,
                                    torch::Tensor exact, torch::Tensor lo, torch::Tensor frac,
                                    torch::Tensor block_keys, int64_t block_size, int64_t min_abs,
                                    torch::Tensor reader_ptr, torch::Tensor reader_block,
                                    torch::Tensor reader_slot, bool k_contiguous, bool v_contiguous,
                                    int64_t threads) {
  check_rows(q, q, "q");
  check_rows(dout, q, "dout");
  for (auto* x : {&kt, &vt, &probs}) check(*x, q, "input");
  TORCH_CHECK(kt.dim() == 4 && kt.sizes() == vt.sizes() && kt.size(0) == q.size(0) && kt.size(2) == q.size(3),
              "kt, vt: expected the forward's (B, KV, D, P)");
  auto key_grad = [&](bool contiguous) {
    const int64_t B = q.size(0), KV = kt.size(1), T = q.size(2), D = q.size(3);
    return contiguous ? empty_huge({B, KV, T, D}, q.options())
                      : empty_huge({B, T, KV, D}, q.options()).transpose(1, 2);
  };
  auto dk = key_grad(k_contiguous), dv = key_grad(v_contiguous);
  const Shape s = shape_of(q, dk, exact, lo, block_keys, block_size, min_abs);
  const Slots slots = slots_of(exact, lo, frac, block_keys);
  check_slots(s, slots);
  TORCH_CHECK(probs.numel() == s.B * s.H * s.S * s.Tq, "probs: expected the forward's (B, H, S, Tq)");
  const int64_t items = s.B * s.KV * ((s.T + kItem - 1) / kItem);
  auto ds = empty_huge(probs.sizes(), q.options());
  auto dq = empty_huge_like(q);
  auto dfrac_items = torch::empty({items, s.R}, q.options());  // every item writes its row
  const bool readers = reader_ptr.numel() > 0;
  if (s.T > 0) {
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_backward", [&] {
      TORCH_CHECK(kt.size(3) == channel_stride<scalar_t>(s.T), "kt, vt: expected the forward's (B, KV, D, P)");
      const auto q_rows = rows_of<const scalar_t>(q);
      const auto dout_rows = rows_of<const scalar_t>(dout);
      with_tile(s.G, [&](auto tile) {
        query_pass<scalar_t, decltype(tile)::value>(
            s, slots, q_rows, kt.data_ptr<scalar_t>(), vt.data_ptr<scalar_t>(), kt.size(3),
            dout_rows, probs.data_ptr<scalar_t>(), ds.data_ptr<scalar_t>(),
            rows_of<scalar_t>(dq), dfrac_items.data_ptr<scalar_t>(), threads);
      });
      key_pass<scalar_t>(s, slots, q_rows, dout_rows, probs.data_ptr<scalar_t>(), ds.data_ptr<scalar_t>(),
                         readers ? reader_ptr.data_ptr<int64_t>() : nullptr,
                         readers ? reader_block.data_ptr<int64_t>() : nullptr,
                         readers ? reader_slot.data_ptr<int64_t>() : nullptr,
                         rows_of<scalar_t>(dk), rows_of<scalar_t>(dv), threads);
    });
  }
  // items summed in a fixed order: the same result whatever thread computed each item
  auto dfrac = torch::zeros({s.R}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_dfrac", [&] {
    const scalar_t* parts = dfrac_items.data_ptr<scalar_t>();
    scalar_t* total = dfrac.data_ptr<scalar_t>();
    for (int64_t i = 0; i < items; ++i)
      for (int64_t r = 0; r < s.R; ++r) total[r] += parts[i * s.R + r];
  });
  return {dq, dk, dv, dfrac};
}

// ------------------------------------------------------------------------------ decoding
// One new position of a batch, read from each layer's ring of cached rows (the decoder's
// step): q (B, H, D); ring_k, ring_v (B, KV, C, D), position p in row p % C. The relative
// rows are p - back[i] (clamped at 0): [exact (M) | rung lower taps (R) | upper taps (R)];
// exact slot m and rung r are valid from position first[m], first[M + r] on; absolute keys
// (BigBird) are block_keys[p / block_size] (n_blocks, A), -1 for none, valid when
// p - key >= min_abs. Slots [exact | rungs | absolute]; a rung's key and value are
// (1 - frac) lo + frac hi. A dense layer's step is every row 0 .. p of a whole-past cache.
struct StepRows {
  std::vector<int64_t> rows;  // ring rows: [exact | lower taps | upper taps | absolute]
  std::vector<char> valid;    // slots: [exact | rungs | absolute]
  int64_t M = 0, R = 0, A = 0;
  const double* frac = nullptr;  // (R,)
};

StepRows slot_rows(int64_t position, int64_t C, const torch::Tensor& back, const torch::Tensor& first,
                   const torch::Tensor& frac, const torch::Tensor& block_keys, int64_t block_size,
                   int64_t min_abs) {
  StepRows s;
  s.R = frac.numel();
  s.M = first.numel() - s.R;
  s.A = block_keys.numel() ? block_keys.size(1) : 0;
  TORCH_CHECK(back.numel() == s.M + 2 * s.R, "decode step: back must hold M + 2R distances");
  const int64_t* back_p = back.data_ptr<int64_t>();
  const int64_t* first_p = first.data_ptr<int64_t>();
  s.rows.resize(s.M + 2 * s.R + s.A);
  s.valid.resize(s.M + s.R + s.A);
  for (int64_t i = 0; i < s.M + 2 * s.R; ++i) s.rows[i] = std::max<int64_t>(position - back_p[i], 0) % C;
  for (int64_t i = 0; i < s.M + s.R; ++i) s.valid[i] = position >= first_p[i];
  if (s.A) {
    const int64_t* keys = block_keys.data_ptr<int64_t>() + (position / block_size) * s.A;
    for (int64_t a = 0; a < s.A; ++a) {
      s.rows[s.M + 2 * s.R + a] = std::max<int64_t>(keys[a], 0) % C;
      s.valid[s.M + s.R + a] = keys[a] >= 0 && position - keys[a] >= min_abs;
    }
  }
  s.frac = s.R ? frac.data_ptr<double>() : nullptr;
  return s;
}

StepRows dense_rows(int64_t position) {
  StepRows s;
  s.M = position + 1;
  s.rows.resize(s.M);
  for (int64_t i = 0; i < s.M; ++i) s.rows[i] = i;
  s.valid.assign(s.M, 1);
  return s;
}

// out (B, H, D) of q (B, H, D) over the rows of ring_k, ring_v (B, KV, C, D) that s names; a
// KV group (its G query heads) is one work item.
template <typename T>
void step_attention(const StepRows& s, int64_t B, int64_t H, int64_t KV, int64_t C, int64_t D, const T* qp,
                    const T* kp, const T* vp, T* op) {
  const int64_t G = H / KV, M = s.M, R = s.R, A = s.A;
  const int64_t n_rows = M + 2 * R + A, n_slots = M + R + A;
  const T scale = T(1) / std::sqrt(T(D));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  at::parallel_for(0, B * KV, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> row_scores(G * n_rows), probs(G * n_slots), weights(G * n_rows);
    std::vector<const T*> k_rows(n_rows), v_rows(n_rows);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / KV, kv = item % KV;
      for (int64_t i = 0; i < n_rows; ++i) {
        k_rows[i] = kp + ((b * KV + kv) * C + s.rows[i]) * D;
        v_rows[i] = vp + ((b * KV + kv) * C + s.rows[i]) * D;
      }
      const T* qg = qp + (b * H + kv * G) * D;  // the group's G query rows
      for (int64_t i = 0; i < n_rows; ++i) {  // each key row read once for the G heads
        for (int64_t g = 0; g < G; ++g) row_scores[g * n_rows + i] = dot(qg + g * D, k_rows[i], D) * scale;
      }
      for (int64_t g = 0; g < G; ++g) {
        T* p = &probs[g * n_slots];
        const T* sc = &row_scores[g * n_rows];
        for (int64_t m = 0; m < M; ++m) p[m] = sc[m];
        for (int64_t r = 0; r < R; ++r) {
          const T f = T(s.frac[r]);
          p[M + r] = sc[M + r] + f * (sc[M + R + r] - sc[M + r]);
        }
        for (int64_t a = 0; a < A; ++a) p[M + R + a] = sc[M + 2 * R + a];
        for (int64_t j = 0; j < n_slots; ++j) if (!s.valid[j]) p[j] = neg_inf;
        softmax_row(p, n_slots);
        T* w = &weights[g * n_rows];
        for (int64_t m = 0; m < M; ++m) w[m] = p[m];
        for (int64_t r = 0; r < R; ++r) {
          const T f = T(s.frac[r]);
          w[M + r] = p[M + r] * (T(1) - f);
          w[M + R + r] = p[M + r] * f;
        }
        for (int64_t a = 0; a < A; ++a) w[M + 2 * R + a] = p[M + R + a];
      }
      // out[g] = sum over rows r, in order, of w[g][r] v[r]: a value row's lanes are loaded
      // once for up to kGroupHeads heads (a dense layer's long past is read once, not G times)
      T* og = op + (b * H + kv * G) * D;
      constexpr int64_t W = Vec<T>::size();
      constexpr int64_t kGroupHeads = 8;
      for (int64_t g0 = 0; g0 < G; g0 += kGroupHeads) {
        const int64_t heads = std::min(kGroupHeads, G - g0);
        for (int64_t i = 0; i < D; i += W) {
          Vec<T> acc[kGroupHeads];
          for (int64_t g = 0; g < heads; ++g) acc[g] = Vec<T>(T(0));
          for (int64_t r = 0; r < n_rows; ++r) {
            const Vec<T> v = load(v_rows[r] + i, D - i);
            for (int64_t g = 0; g < heads; ++g) {
              const T w = weights[(g0 + g) * n_rows + r];
              if (w != 0) acc[g] = at::vec::fmadd(Vec<T>(w), v, acc[g]);
            }
          }
          for (int64_t g = 0; g < heads; ++g) acc[g].store(og + (g0 + g) * D + i, std::min(W, D - i));
        }
      }
    }
  });
}

std::vector<torch::Tensor> decode_step(torch::Tensor q, torch::Tensor ring_k, torch::Tensor ring_v,
                                       int64_t position, torch::Tensor back, torch::Tensor first,
                                       torch::Tensor frac, torch::Tensor block_keys,
                                       int64_t block_size, int64_t min_abs) {
  TORCH_CHECK(q.dim() == 3 && ring_k.dim() == 4, "decode_step: q (B, H, D), rings (B, KV, C, D)");
  for (auto* x : {&q, &ring_k, &ring_v}) check(*x, q, "decode_step input");
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2), KV = ring_k.size(1), C = ring_k.size(2);
  const StepRows s = slot_rows(position, C, back, first, frac, block_keys, block_size, min_abs);
  auto out = torch::empty_like(q);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_decode_step", [&] {
    step_attention<scalar_t>(s, B, H, KV, C, D, q.data_ptr<scalar_t>(), ring_k.data_ptr<scalar_t>(),
                             ring_v.data_ptr<scalar_t>(), out.data_ptr<scalar_t>());
  });
  return {out};
}

// ------------------------------------------------------------------------------ few-row products
// y (M, N) = x (M, K) w (N, K)^T for float32 x and weights in float32, bfloat16 or int8 (with
// a float32 scale per output channel), summed in float32: a decoding step reads each weight
// once, and narrower weights are fewer bytes. A tile of R rows of x (R <= 4) and
// kWeightRows rows of w keeps its R x kWeightRows sums in registers: each widened weight
// vector serves R rows of x, and the weight rows are read side by side (their loads in
// flight at once). Each sum runs over k in order, whatever the tile, so results do not
// depend on M or the thread count. Each weight load also prefetches the bytes 16 KB on: the
// hardware's prefetcher stops at every 4 KB page (measured on a Xeon: bfloat16 at M = 1,
// one thread, 7 -> 14 GB/s from memory). The hint asks for L2, not L1: a tile's rows put 8
// streams 16 KB ahead, more than L1 holds (measured on an AMD EPYC, float32 at M = 1, 250 MB
// of weights: 16 -> 21 GB/s on two threads, 10 -> 14 on one).
constexpr int kWeightRows = 4;
constexpr int64_t kPrefetchBytes = 16384;

// Blocks of kWeightRows rows of w (row stride ld) split between torch's threads; in each,
// tile.template run<R>(x rows, rows of w, first output column, out, cols) over x's rows, at
// most 4 at a time; y's rows are ldy apart (the tile's N), so products can fill columns of
// one output side by side. An edge block repeats its last weight row (its extra sums are dropped).
template <typename T, typename Tile, int Rows = kWeightRows>
void narrow_product(int64_t M, int64_t N, int64_t K, int64_t ld, const float* xp, const T* wp,
                    float* yp, int64_t ldy, const Tile& tile) {
  const int64_t blocks = (N + Rows - 1) / Rows;
  at::parallel_for(0, blocks, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t n0 = b * Rows, cols = std::min<int64_t>(Rows, N - n0);
      const T* w[Rows];
      for (int c = 0; c < Rows; ++c) w[c] = wp + (n0 + std::min<int64_t>(c, cols - 1)) * ld;
      for (int64_t m = 0; m < M;) {
        const float* x = xp + m * K;
        float* out = yp + m * ldy + n0;
        switch (std::min<int64_t>(4, M - m)) {
          case 4: tile.template run<4>(x, w, n0, out, cols); m += 4; break;
          case 3: tile.template run<3>(x, w, n0, out, cols); m += 3; break;
          case 2: tile.template run<2>(x, w, n0, out, cols); m += 2; break;
          default: tile.template run<1>(x, w, n0, out, cols); m += 1; break;
        }
      }
    }
  });
}

struct Bf16Tile {
  int64_t K, N;  // N: the output's row stride
  template <int R>
  void run(const float* x, const c10::BFloat16* const* w, int64_t, float* out, int64_t cols) const {
    using BVec = at::vec::Vectorized<c10::BFloat16>;
    using FVec = at::vec::Vectorized<float>;
    constexpr int64_t L = BVec::size(), W = FVec::size();  // L = 2 W
    constexpr int64_t ahead = kPrefetchBytes / sizeof(c10::BFloat16);
    FVec acc[R][kWeightRows];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < kWeightRows; ++c) acc[r][c] = FVec(0.f);
    for (int64_t k = 0; k < K; k += L) {
      const int64_t left = K - k, lo = std::min(W, left), hi = std::min(W, left - W);
      FVec w_lo[kWeightRows], w_hi[kWeightRows];
      for (int c = 0; c < kWeightRows; ++c) {
        __builtin_prefetch(w[c] + ahead + k, 0, 2);  // into L2: a hint, never faults
        auto halves = at::vec::convert_to_float<c10::BFloat16>(BVec::loadu(w[c] + k, std::min(L, left)));
        w_lo[c] = std::get<0>(halves);
        w_hi[c] = std::get<1>(halves);
      }
      for (int r = 0; r < R; ++r) {
        const FVec x_lo = FVec::loadu(x + r * K + k, lo);
        for (int c = 0; c < kWeightRows; ++c) acc[r][c] = at::vec::fmadd(x_lo, w_lo[c], acc[r][c]);
        if (hi > 0) {
          const FVec x_hi = FVec::loadu(x + r * K + k + W, hi);
          for (int c = 0; c < kWeightRows; ++c) acc[r][c] = at::vec::fmadd(x_hi, w_hi[c], acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < cols; ++c) out[r * N + c] = lane_sum(acc[r][c]);
  }
};

constexpr int kF32Rows = 8;  // float32 rows are twice bfloat16's bytes: more streams in flight

struct F32Tile {
  int64_t K, N;
  template <int R>
  void run(const float* x, const float* const* w, int64_t, float* out, int64_t cols) const {
    using FVec = at::vec::Vectorized<float>;
    constexpr int64_t W = FVec::size();
    constexpr int64_t ahead = kPrefetchBytes / sizeof(float);
    FVec acc[R][kF32Rows];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < kF32Rows; ++c) acc[r][c] = FVec(0.f);
    for (int64_t k = 0; k < K; k += W) {
      const int64_t n = std::min(W, K - k);
      FVec wv[kF32Rows];
      for (int c = 0; c < kF32Rows; ++c) {
        __builtin_prefetch(w[c] + ahead + k, 0, 2);  // into L2: a hint, never faults
        wv[c] = FVec::loadu(w[c] + k, n);
      }
      for (int r = 0; r < R; ++r) {
        const FVec xv = FVec::loadu(x + r * K + k, n);
        for (int c = 0; c < kF32Rows; ++c) acc[r][c] = at::vec::fmadd(xv, wv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < cols; ++c) out[r * N + c] = lane_sum(acc[r][c]);
  }
};

struct Int8Tile {
  int64_t K, N;
  const float* scale;  // (N,)
  template <int R>
  void run(const float* x, const int8_t* const* w, int64_t n0, float* out, int64_t cols) const {
    using FVec = at::vec::Vectorized<float>;
    using IVec = at::vec::Vectorized<int8_t>;
    constexpr int64_t W = FVec::size();  // <= IVec::size() / 2: one quarter or half a load
    FVec acc[R][kWeightRows];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < kWeightRows; ++c) acc[r][c] = FVec(0.f);
    for (int64_t k = 0; k < K; k += W) {
      const int64_t n = std::min(W, K - k);
      FVec widened[kWeightRows];  // lanes past K hold 1 (the masked load's fill); x's hold 0
      for (int c = 0; c < kWeightRows; ++c) {
        __builtin_prefetch(w[c] + kPrefetchBytes + k, 0, 2);  // into L2: a hint, never faults
        widened[c] = at::vec::convert<float>(IVec::loadu(w[c] + k, static_cast<int8_t>(n)));
      }
      for (int r = 0; r < R; ++r) {
        const FVec xv = FVec::loadu(x + r * K + k, n);
        for (int c = 0; c < kWeightRows; ++c) acc[r][c] = at::vec::fmadd(xv, widened[c], acc[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < cols; ++c) out[r * N + c] = lane_sum(acc[r][c]) * scale[n0 + c];
  }
};

// x (..., K) contiguous: M = its rows; y (..., N). Taking x's shape here saves a decoding
// step's hundred products their Python reshapes and views (microseconds each).
torch::Tensor narrow_output(const torch::Tensor& x, int64_t N) {
  auto sizes = x.sizes().vec();
  sizes.back() = N;
  return torch::empty(sizes, x.options());
}

torch::Tensor bf16_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() >= 1 && w.dim() == 2 && x.size(-1) == w.size(1), "bf16_linear: x (..., K), w (N, K)");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kBFloat16,
              "bf16_linear: float32 x and bfloat16 w");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && x.device().is_cpu() && w.device().is_cpu(),
              "bf16_linear: contiguous CPU tensors");
  const int64_t K = x.size(-1), M = K ? x.numel() / K : 0, N = w.size(0);
  auto y = narrow_output(x, N);
  narrow_product(M, N, K, K, x.data_ptr<float>(), w.data_ptr<c10::BFloat16>(), y.data_ptr<float>(), N,
                 Bf16Tile{K, N});
  return y;
}

// float32 weights, row-major (N, K): a decoding step's products at the read roof, where a BLAS
// matrix-vector product streamed them at well under it (measured in docs/performance.md).
torch::Tensor f32_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() >= 1 && w.dim() == 2 && x.size(-1) == w.size(1), "f32_linear: x (..., K), w (N, K)");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat,
              "f32_linear: float32 x and w");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && x.device().is_cpu() && w.device().is_cpu(),
              "f32_linear: contiguous CPU tensors");
  const int64_t K = x.size(-1), M = K ? x.numel() / K : 0, N = w.size(0);
  auto y = narrow_output(x, N);
  narrow_product<float, F32Tile, kF32Rows>(M, N, K, K, x.data_ptr<float>(), w.data_ptr<float>(),
                                          y.data_ptr<float>(), N, F32Tile{K, N});
  return y;
}

// int8: w ~ scale * q per output channel (weight-only int8, a quarter of float32's bytes);
// rows of w may be padded (row stride >= K).
torch::Tensor int8_linear(torch::Tensor x, torch::Tensor w, torch::Tensor scale) {
  TORCH_CHECK(x.dim() >= 1 && w.dim() == 2 && x.size(-1) <= w.size(1),
              "int8_linear: x (..., K), w (N, K or more: rows may be padded)");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kChar &&
                  scale.scalar_type() == torch::kFloat && scale.numel() == w.size(0),
              "int8_linear: float32 x, int8 w, float32 scale (N,)");
  TORCH_CHECK(x.is_contiguous() && w.stride(1) == 1 && w.stride(0) >= w.size(1) && scale.is_contiguous() &&
                  x.device().is_cpu() && w.device().is_cpu() && scale.device().is_cpu(),
              "int8_linear: CPU tensors, x and scale contiguous, w's rows contiguous");
  const int64_t K = x.size(-1), M = K ? x.numel() / K : 0, N = w.size(0);
  auto y = narrow_output(x, N);
  narrow_product(M, N, K, w.stride(0), x.data_ptr<float>(), w.data_ptr<int8_t>(), y.data_ptr<float>(), N,
                 Int8Tile{K, N, scale.data_ptr<float>()});
  return y;
}

// ------------------------------------------------------------------ a block's decoding step
// One token of one block in one call (B rows, float32 activations), no Python between its
// parts: x += o(attention(RoPE(qkv(RMSNorm(x))))); x += down(silu(gate) * up)(RMSNorm(x)). The
// products are the few-row products above (the same sums as a module's), the attention is
// decode_step's (a dense layer reads every row of its whole-past cache), and norms, RoPE,
// SwiGLU and the residuals run on the calling thread (a few thousand values: a fork of the
// pool would cost more than they do). The activation buffers are the calling thread's, kept
// between calls (the attention's per-row scratch is the read's own, as in decode_step).
//
// A stage is a list of matrices whose outputs sit side by side (q, k, v fused as one matrix,
// or three int8 matrices): each float32 or bfloat16 with contiguous rows, or int8 with a
// float32 scale per row (its entry of `scales`; the others are empty).
void stage_product(const float* x, int64_t M, int64_t K, const std::vector<torch::Tensor>& ws,
                   const std::vector<torch::Tensor>& scales, float* y, int64_t ldy) {
  int64_t col = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const torch::Tensor& w = ws[i];
    const int64_t N = w.size(0), ld = w.stride(0);
    float* out = y + col;
    switch (w.scalar_type()) {
      case torch::kFloat:
        narrow_product<float, F32Tile, kF32Rows>(M, N, K, ld, x, w.data_ptr<float>(), out, ldy, F32Tile{K, ldy});
        break;
      case torch::kBFloat16:
        narrow_product(M, N, K, ld, x, w.data_ptr<c10::BFloat16>(), out, ldy, Bf16Tile{K, ldy});
        break;
      default:
        narrow_product(M, N, K, ld, x, w.data_ptr<int8_t>(), out, ldy, Int8Tile{K, ldy, scales[i].data_ptr<float>()});
    }
    col += N;
  }
}

// The output width of a stage, after checking its matrices and scales.
int64_t stage_width(const std::vector<torch::Tensor>& ws, const std::vector<torch::Tensor>& scales, int64_t K,
                    const char* name) {
  TORCH_CHECK(!ws.empty() && ws.size() == scales.size(), "layer_step: ", name, ": one scale entry per matrix");
  int64_t width = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const torch::Tensor& w = ws[i];
    const auto type = w.scalar_type();
    TORCH_CHECK(w.dim() == 2 && w.device().is_cpu() && w.stride(1) == 1 && w.stride(0) >= K && w.size(1) >= K,
                "layer_step: ", name, ": CPU matrices (N, K) with contiguous rows");
    TORCH_CHECK(type == torch::kFloat || type == torch::kBFloat16 || type == torch::kChar,
                "layer_step: ", name, ": float32, bfloat16 or int8 matrices");
    TORCH_CHECK((type == torch::kChar) == (scales[i].numel() > 0), "layer_step: ", name,
                ": a scale per row for an int8 matrix, none for others");
    TORCH_CHECK(type != torch::kChar || (scales[i].scalar_type() == torch::kFloat && scales[i].is_contiguous() &&
                                         scales[i].numel() == w.size(0)),
                "layer_step: ", name, ": an int8 matrix's scales are float32 (N,)");
    TORCH_CHECK(type == torch::kChar || w.size(1) == K, "layer_step: ", name, ": matrices of K columns");
    width += w.size(0);
  }
  return width;
}

// out (d,) = x * rsqrt(mean(x^2) + eps) * w, as F.rms_norm.
void rms_norm_row(const float* x, const float* w, int64_t d, float eps, float* out) {
  constexpr int64_t W = Vec<float>::size();
  Vec<float> acc(0.f);
  for (int64_t i = 0; i < d; i += W) {
    const Vec<float> v = load(x + i, d - i);
    acc = at::vec::fmadd(v, v, acc);
  }
  const float inv = 1.f / std::sqrt(lane_sum(acc) / float(d) + eps);
  for (int64_t i = 0; i < d; ++i) out[i] = x[i] * inv * w[i];
}

// Rotate-half RoPE of one head (D,) by a position's cos, sin (D,), in place.
void rotate_half(float* x, const float* cos, const float* sin, int64_t D) {
  const int64_t h = D / 2;
  for (int64_t i = 0; i < h; ++i) {
    const float a = x[i], b = x[i + h];
    x[i] = a * cos[i] - b * sin[i];
    x[i + h] = b * cos[i + h] + a * sin[i + h];
  }
}

struct StepBuffers {
  std::vector<float> normed, qkv, q, attended, hidden, out;
};

// x (B, d) float32, updated in place. weights, scales: the stages [qkv, o, gate_up, down] (no
// feed-forward: two stages, and ffn_norm empty). cos, sin (D,) the position's rotation, or
// empty (a NoPE layer). ring_k, ring_v (B, KV, C, D) float32: this position's key and value
// go to row position % C; the read is a slot pattern's (back, first, frac, block_keys,
// block_size, min_abs, as decode_step) or, with dense, every row 0 .. position (C > position).
void layer_step(torch::Tensor x, torch::Tensor attn_norm, torch::Tensor ffn_norm, double eps,
                std::vector<std::vector<torch::Tensor>> weights, std::vector<std::vector<torch::Tensor>> scales,
                int64_t heads, int64_t kv_heads, torch::Tensor cos, torch::Tensor sin, torch::Tensor ring_k,
                torch::Tensor ring_v, int64_t position, bool dense, torch::Tensor back, torch::Tensor first,
                torch::Tensor frac, torch::Tensor block_keys, int64_t block_size, int64_t min_abs) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat && x.is_contiguous() && x.device().is_cpu(),
              "layer_step: x (B, d) contiguous float32 on the CPU");
  TORCH_CHECK(ring_k.dim() == 4 && ring_k.scalar_type() == torch::kFloat && ring_k.is_contiguous() &&
                  ring_v.sizes() == ring_k.sizes() && ring_v.scalar_type() == torch::kFloat && ring_v.is_contiguous(),
              "layer_step: rings (B, KV, C, D) contiguous float32");
  const bool feed_forward = ffn_norm.numel() > 0;
  TORCH_CHECK(weights.size() == (feed_forward ? 4u : 2u) && scales.size() == weights.size(),
              "layer_step: stages [qkv, o, gate_up, down] ([qkv, o] without a feed-forward)");
  const int64_t B = x.size(0), d = x.size(1), KV = kv_heads, H = heads, C = ring_k.size(2), D = ring_k.size(3);
  TORCH_CHECK(ring_k.size(0) == B && ring_k.size(1) == KV && H % KV == 0 && D % 2 == 0,
              "layer_step: rings (B, KV, C, D) for x's B rows, heads a multiple of KV heads");
  TORCH_CHECK(attn_norm.numel() == d && (!feed_forward || ffn_norm.numel() == d), "layer_step: norms of d values");
  const bool rotary = cos.numel() > 0;
  TORCH_CHECK(!rotary || (cos.numel() == D && sin.numel() == D), "layer_step: cos and sin of D values");
  TORCH_CHECK(!dense || C > position, "layer_step: a dense layer needs its whole past (C > position)");
  const int64_t qkv_width = stage_width(weights[0], scales[0], d, "qkv");
  TORCH_CHECK(qkv_width == (H + 2 * KV) * D, "layer_step: qkv gives (heads + 2 kv_heads) * D outputs");
  TORCH_CHECK(stage_width(weights[1], scales[1], H * D, "o") == d, "layer_step: o gives d outputs");
  int64_t width = 0;
  if (feed_forward) {
    width = stage_width(weights[2], scales[2], d, "gate_up") / 2;
    TORCH_CHECK(stage_width(weights[3], scales[3], width, "down") == d, "layer_step: down gives d outputs");
  }
  const StepRows rows =
      dense ? dense_rows(position) : slot_rows(position, C, back, first, frac, block_keys, block_size, min_abs);

  thread_local StepBuffers buf;
  buf.normed.resize(B * d);
  buf.qkv.resize(B * qkv_width);
  buf.q.resize(B * H * D);
  buf.attended.resize(B * H * D);
  buf.hidden.resize(B * 2 * width);
  buf.out.resize(B * d);
  float* xp = x.data_ptr<float>();
  float* kp = ring_k.data_ptr<float>();
  float* vp = ring_v.data_ptr<float>();
  const float* cos_p = rotary ? cos.data_ptr<float>() : nullptr;
  const float* sin_p = rotary ? sin.data_ptr<float>() : nullptr;
  const float e = float(eps);

  for (int64_t b = 0; b < B; ++b) rms_norm_row(xp + b * d, attn_norm.data_ptr<float>(), d, e, &buf.normed[b * d]);
  stage_product(buf.normed.data(), B, d, weights[0], scales[0], buf.qkv.data(), qkv_width);
  const int64_t row = position % C;
  for (int64_t b = 0; b < B; ++b) {
    float* qkv = &buf.qkv[b * qkv_width];
    for (int64_t h = 0; rotary && h < H + KV; ++h) rotate_half(qkv + h * D, cos_p, sin_p, D);  // q's, k's
    std::copy(qkv, qkv + H * D, &buf.q[b * H * D]);
    for (int64_t kv = 0; kv < KV; ++kv) {
      const int64_t at = ((b * KV + kv) * C + row) * D;
      std::copy(qkv + (H + kv) * D, qkv + (H + kv + 1) * D, kp + at);
      std::copy(qkv + (H + KV + kv) * D, qkv + (H + KV + kv + 1) * D, vp + at);
    }
  }
  step_attention<float>(rows, B, H, KV, C, D, buf.q.data(), kp, vp, buf.attended.data());
  stage_product(buf.attended.data(), B, H * D, weights[1], scales[1], buf.out.data(), d);
  for (int64_t i = 0; i < B * d; ++i) xp[i] += buf.out[i];
  if (!feed_forward) return;

  for (int64_t b = 0; b < B; ++b) rms_norm_row(xp + b * d, ffn_norm.data_ptr<float>(), d, e, &buf.normed[b * d]);
  stage_product(buf.normed.data(), B, d, weights[2], scales[2], buf.hidden.data(), 2 * width);
  for (int64_t b = 0; b < B; ++b) {  // silu(gate) * up, packed into the first width values of the row
    float* gate = &buf.hidden[b * 2 * width];
    float* out = &buf.hidden[b * width];
    for (int64_t i = 0; i < width; ++i) {
      const float g = gate[i];
      out[i] = g / (1.f + std::exp(-g)) * gate[width + i];
    }
  }
  stage_product(buf.hidden.data(), B, width, weights[3], scales[3], buf.out.data(), d);
  for (int64_t i = 0; i < B * d; ++i) xp[i] += buf.out[i];
}

// How many threads at::parallel_for runs on here: torch's intra-op threads when the extension is
// built with OpenMP (torch's parallel backend is inline OpenMP in its headers), 1 without it.
int64_t parallel_threads() {
  std::atomic<int64_t> most{0};
  at::parallel_for(0, 1024, 1, [&](int64_t, int64_t) {
    const int64_t id = at::get_thread_num() + 1;
    int64_t seen = most.load();
    while (id > seen && !most.compare_exchange_weak(seen, id)) {
    }
  });
  return most.load();
}

// Subnormal floats read and written as zero (x86's DAZ and FTZ) on every thread at::parallel_for
// runs on, the caller included: the mode is per thread, and torch.set_flush_denormal sets only
// the caller's. One item per thread (at::parallel_for gives each of n threads one of n items).
// Returns whether the CPU has the mode.
bool set_flush_denormal(bool on) {
  std::atomic<bool> supported{true};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    if (!at::globalContext().setFlushDenormal(on)) supported = false;
  });
  return at::globalContext().setFlushDenormal(on) && supported.load();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "sparse attention over key slots, forward (CPU)");
  m.def("backward", &backward, "sparse attention over key slots, backward (CPU)");
  m.def("decode_step", &decode_step, "one decoding position over a ring of cached rows (CPU)");
  m.def("bf16_linear", &bf16_linear, "float32 x times bfloat16 weights, float32 sums (CPU)");
  m.def("f32_linear", &f32_linear, "float32 x times row-major float32 weights, few rows (CPU)");
  m.def("layer_step", &layer_step, "one decoding step of a block, in place on x (CPU)");
  m.def("int8_linear", &int8_linear, "float32 x times int8 weights and per-row scales (CPU)");
  m.def("parallel_threads", &parallel_threads, "threads at::parallel_for runs on (CPU)");
  m.def("set_flush_denormal", &set_flush_denormal, "subnormals as zero on every intra-op thread");
}
