// The sparse op on the CPU as compiled loops: attention of every query over its key slots.
//
// Layout: q, out, dout (B, T, H, D) and k, v (B, T, KV, D), contiguous, one accumulation type
// (float or double). Slots of query t (the Python side resolves them against T):
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
// AVX-512 or AVX2 with FMA where the CPU has them, ATen's portable loops elsewhere). The inner
// loops run over the head dim D in vectors; per position, the G query heads of a KV group
// are one tile, so each key row, value row and blended rung row is loaded once for the
// tile's G dot products and G multiply-adds.
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

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kBlock = 16;  // positions per work item

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

// out[g * out_stride] = rows[g] . x for the kG rows at rows + g * D (a tile of query heads):
// x is loaded once for all of them.
template <typename T, int kG>
inline void dots(const T* rows, const T* x, int64_t D, T* out, int64_t out_stride) {
  constexpr int64_t W = Vec<T>::size();
  Vec<T> acc[kG];
  for (int g = 0; g < kG; ++g) acc[g] = Vec<T>(T(0));
  for (int64_t i = 0; i < D; i += W) {
    const Vec<T> xv = load(x + i, D - i);
    for (int g = 0; g < kG; ++g) acc[g] = at::vec::fmadd(load(rows + g * D + i, D - i), xv, acc[g]);
  }
  for (int g = 0; g < kG; ++g) out[g * out_stride] = lane_sum(acc[g]);
}

// out[g] = sum_j w[g * S + j] * xs[j] for the kG rows of out (stride D); a null xs[j] is
// skipped. Each row xs[j] is loaded once per vector of D for the whole tile.
template <typename T, int kG>
inline void mix(const T* w, int64_t S, const T* const* xs, int64_t D, T* out) {
  constexpr int64_t W = Vec<T>::size();
  for (int64_t i = 0; i < D; i += W) {
    Vec<T> acc[kG];
    for (int g = 0; g < kG; ++g) acc[g] = Vec<T>(T(0));
    for (int64_t j = 0; j < S; ++j) {
      if (!xs[j]) continue;
      const Vec<T> xv = load(xs[j] + i, D - i);
      for (int g = 0; g < kG; ++g) acc[g] = at::vec::fmadd(Vec<T>(w[g * S + j]), xv, acc[g]);
    }
    for (int g = 0; g < kG; ++g) acc[g].store(out + g * D + i, std::min(W, D - i));
  }
}

// out = lo + frac * (hi - lo), and (when diff is given) diff = hi - lo.
template <typename T>
inline void blend(const T* lo, const T* hi, T frac, T* out, T* diff, int64_t n) {
  constexpr int64_t W = Vec<T>::size();
  const Vec<T> f(frac);
  for (int64_t i = 0; i < n; i += W) {
    const Vec<T> a = load(lo + i, n - i), d = load(hi + i, n - i) - a;
    at::vec::fmadd(f, d, a).store(out + i, std::min(W, n - i));
    if (diff) d.store(diff + i, std::min(W, n - i));
  }
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
};

struct Slots {
  const int64_t* exact;       // (M,)
  const int64_t* lo;          // (R,)
  const double* frac;         // (R,)
  const int64_t* block_keys;  // (n_blocks, A)
};

Shape shape_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& exact,
               const torch::Tensor& lo, const torch::Tensor& block_keys, int64_t block_size,
               int64_t min_abs) {
  Shape s;
  s.B = q.size(0);
  s.T = q.size(1);
  s.H = q.size(2);
  s.D = q.size(3);
  s.KV = k.size(2);
  s.G = s.H / s.KV;
  s.M = exact.numel();
  s.R = lo.numel();
  s.A = block_keys.numel() ? block_keys.size(1) : 0;
  s.n_blocks = block_keys.numel() ? block_keys.size(0) : 0;
  s.S = s.A + s.M + s.R;
  s.block_size = std::max<int64_t>(1, block_size);
  s.min_abs = min_abs;
  return s;
}

Slots slots_of(const torch::Tensor& exact, const torch::Tensor& lo, const torch::Tensor& frac,
               const torch::Tensor& block_keys) {
  return {exact.data_ptr<int64_t>(), lo.data_ptr<int64_t>(), frac.data_ptr<double>(),
          block_keys.numel() ? block_keys.data_ptr<int64_t>() : nullptr};
}

// P and dS are slot-major, (S, B, T, H): the key pass reads one slot of consecutive queries.
inline int64_t slot_major(const Shape& s, int64_t slot, int64_t b, int64_t t) {
  return ((slot * s.B + b) * s.T + t) * s.H;
}

// The rows position t reads, shared by its G heads: keys[j] and values[j] per slot (nullptr:
// not valid at t). A rung's rows are blended into key_rows and value_rows (R rows of D), the
// taps' differences (hi - lo) into k_diff and v_diff when they are given (the backward's).
template <typename T>
inline void slot_rows(const Shape& s, const Slots& slots, const T* k_base, const T* v_base,
                      int64_t t, const T** keys, const T** values, T* key_rows, T* value_rows,
                      T* k_diff, T* v_diff) {
  const int64_t row_stride = s.KV * s.D;
  for (int64_t a = 0; a < s.A; ++a) {
    const int64_t key = slots.block_keys[(t / s.block_size) * s.A + a];
    const bool ok = key >= 0 && t - key >= s.min_abs;
    keys[a] = ok ? k_base + key * row_stride : nullptr;
    values[a] = ok ? v_base + key * row_stride : nullptr;
  }
  for (int64_t m = 0; m < s.M; ++m) {
    const int64_t d = slots.exact[m];
    const bool ok = t >= d;
    keys[s.A + m] = ok ? k_base + (t - d) * row_stride : nullptr;
    values[s.A + m] = ok ? v_base + (t - d) * row_stride : nullptr;
  }
  for (int64_t r = 0; r < s.R; ++r) {
    const int64_t lo = slots.lo[r];
    const int64_t slot = s.A + s.M + r;
    if (t < lo) {
      keys[slot] = values[slot] = nullptr;
      continue;
    }
    const int64_t hi = std::max<int64_t>(t - lo - 1, 0);
    const T f = T(slots.frac[r]);
    blend(k_base + (t - lo) * row_stride, k_base + hi * row_stride, f, key_rows + r * s.D,
          k_diff ? k_diff + r * s.D : nullptr, s.D);
    blend(v_base + (t - lo) * row_stride, v_base + hi * row_stride, f, value_rows + r * s.D,
          v_diff ? v_diff + r * s.D : nullptr, s.D);
    keys[slot] = key_rows + r * s.D;
    values[slot] = value_rows + r * s.D;
  }
}

// ------------------------------------------------------------------------------ forward
// Per position: the rows its slots read (shared by the G heads), then per tile of kG heads
// the scores (each key row loaded once for the tile), the softmax (written to probs) and the
// output (each value row loaded once for the tile).
template <typename T, int kG>
void forward_impl(const Shape& s, const Slots& slots, const T* q, const T* k, const T* v, T* out,
                  T* probs, int64_t threads) {
  const T scale = T(1) / std::sqrt(T(s.D));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t t_blocks = (s.T + kBlock - 1) / kBlock;
  parallel_items(s.B * s.KV * t_blocks, threads, [&](int64_t item) {
    const int64_t tb = item % t_blocks, kv = (item / t_blocks) % s.KV, b = item / t_blocks / s.KV;
    std::vector<T> key_rows(s.R * s.D), value_rows(s.R * s.D), score(kG * s.S);
    std::vector<const T*> keys(s.S), values(s.S);
    const T* k_base = k + (b * s.T * s.KV + kv) * s.D;
    const T* v_base = v + (b * s.T * s.KV + kv) * s.D;
    for (int64_t t = tb * kBlock; t < std::min(s.T, (tb + 1) * kBlock); ++t) {
      slot_rows(s, slots, k_base, v_base, t, keys.data(), values.data(), key_rows.data(),
                value_rows.data(), (T*)nullptr, (T*)nullptr);
      for (int64_t g0 = 0; g0 < s.G; g0 += kG) {
        const int64_t row = (b * s.T + t) * s.H + kv * s.G + g0;  // the tile's first head
        const T* qv = q + row * s.D;  // the tile's kG query rows, one after another
        T* p = score.data();          // their kG rows of S scores, then probabilities
        for (int64_t j = 0; j < s.S; ++j) {
          if (keys[j]) {
            dots<T, kG>(qv, keys[j], s.D, p + j, s.S);
          } else {
            for (int g = 0; g < kG; ++g) p[g * s.S + j] = neg_inf;
          }
        }
        for (int g = 0; g < kG; ++g) {
          T* pg = p + g * s.S;
          for (int64_t j = 0; j < s.S; ++j) pg[j] *= scale;
          softmax_row(pg, s.S);
        }
        mix<T, kG>(p, s.S, values.data(), s.D, out + row * s.D);
        for (int64_t j = 0; j < s.S; ++j) {
          T* to = probs + slot_major(s, j, b, t) + kv * s.G + g0;
          for (int g = 0; g < kG; ++g) to[g] = p[g * s.S + j];
        }
      }
    }
  });
}

// ------------------------------------------------------------------------------ backward
// Pass 1, per query: dS, dQ and each item's share of d(frac).
template <typename T, int kG>
void query_pass(const Shape& s, const Slots& slots, const T* q, const T* k, const T* v,
                const T* out, const T* dout, const T* probs, T* ds_all, T* dq, T* dfrac_items,
                int64_t threads) {
  const T scale = T(1) / std::sqrt(T(s.D));
  const int64_t t_blocks = (s.T + kBlock - 1) / kBlock;
  parallel_items(s.B * s.KV * t_blocks, threads, [&](int64_t item) {
    const int64_t tb = item % t_blocks, kv = (item / t_blocks) % s.KV, b = item / t_blocks / s.KV;
    // per rung: the blended rows and the taps' differences (hi - lo), shared by the G heads
    std::vector<T> key_rows(s.R * s.D), value_rows(s.R * s.D), k_diff(s.R * s.D), v_diff(s.R * s.D);
    std::vector<const T*> keys(s.S), values(s.S);
    std::vector<T> dp(kG), score_slope(kG), value_slope(kG), p_rows(kG * s.S), ds_rows(kG * s.S);
    T* dfrac = dfrac_items + item * s.R;
    std::fill(dfrac, dfrac + s.R, T(0));
    const T* k_base = k + (b * s.T * s.KV + kv) * s.D;
    const T* v_base = v + (b * s.T * s.KV + kv) * s.D;
    for (int64_t t = tb * kBlock; t < std::min(s.T, (tb + 1) * kBlock); ++t) {
      slot_rows(s, slots, k_base, v_base, t, keys.data(), values.data(), key_rows.data(),
                value_rows.data(), k_diff.data(), v_diff.data());
      for (int64_t g0 = 0; g0 < s.G; g0 += kG) {
        const int64_t row = (b * s.T + t) * s.H + kv * s.G + g0;  // the tile's first head
        const T* qv = q + row * s.D;
        const T* dov = dout + row * s.D;
        T* p = p_rows.data();  // the tile's kG rows of S probabilities, and of dS
        T* ds = ds_rows.data();
        for (int64_t j = 0; j < s.S; ++j) {
          const T* from = probs + slot_major(s, j, b, t) + kv * s.G + g0;
          for (int g = 0; g < kG; ++g) p[g * s.S + j] = from[g];
        }
        T delta[kG];  // sum_j p_j dP_j = dout . out, per head
        for (int g = 0; g < kG; ++g) delta[g] = dot(dov + g * s.D, out + (row + g) * s.D, s.D);
        for (int64_t j = 0; j < s.S; ++j) {
          if (!keys[j]) {
            for (int g = 0; g < kG; ++g) ds[g * s.S + j] = 0;
            continue;
          }
          dots<T, kG>(dov, values[j], s.D, dp.data(), 1);
          for (int g = 0; g < kG; ++g) {
            ds[g * s.S + j] = p[g * s.S + j] * (dp[g] - delta[g]);
          }
        }
        for (int64_t j = 0; j < s.S; ++j) {
          T* to = ds_all + slot_major(s, j, b, t) + kv * s.G + g0;
          for (int g = 0; g < kG; ++g) to[g] = ds[g * s.S + j];
        }
        mix<T, kG>(ds, s.S, keys.data(), s.D, dq + row * s.D);
        const Vec<T> scale_v(scale);
        for (int64_t i = 0; i < kG * s.D; i += Vec<T>::size()) {
          const int64_t n = std::min<int64_t>(Vec<T>::size(), kG * s.D - i);
          (load(dq + row * s.D + i, n) * scale_v).store(dq + row * s.D + i, n);
        }
        for (int64_t r = 0; r < s.R; ++r) {
          const int64_t j = s.A + s.M + r;
          if (!keys[j]) continue;
          // the rung's score moves by scale q.(k_hi - k_lo), its value by v_hi - v_lo
          dots<T, kG>(qv, &k_diff[r * s.D], s.D, score_slope.data(), 1);
          dots<T, kG>(dov, &v_diff[r * s.D], s.D, value_slope.data(), 1);
          for (int g = 0; g < kG; ++g) {
            dfrac[r] += ds[g * s.S + j] * scale * score_slope[g] + p[g * s.S + j] * value_slope[g];
          }
        }
      }
    }
  });
}

// Pass 2, per key row j: the queries that read it are j + d for each relative slot (a rung's
// lower tap at j + lo, its upper tap at j + lo + 1, and at j = 0 also query lo's upper tap,
// whose row -1 is replaced by row 0), and for absolute keys the queries of the blocks that
// drew it (reader_ptr / reader_block / reader_slot: the blocks and slots reading each key).
// Each reader's G heads add ds * q to dK and p * dout to dV, in vectors over D. An item
// walks one slot over its block of keys at a time, so the rows it reads (queries j + d, and
// their P and dS in slot-major order) are consecutive; every key row still receives its
// terms in the same order (absolute readers, exact slots, rungs), whatever the thread.
template <typename T, int kG>
void key_pass(const Shape& s, const Slots& slots, const T* q, const T* dout, const T* probs,
              const T* ds_all, const int64_t* reader_ptr, const int64_t* reader_block,
              const int64_t* reader_slot, T* dk, T* dv, int64_t threads) {
  constexpr int64_t W = Vec<T>::size();
  const T scale = T(1) / std::sqrt(T(s.D));
  const int64_t j_blocks = (s.T + kBlock - 1) / kBlock;
  parallel_items(s.B * s.KV * j_blocks, threads, [&](int64_t item) {
    const int64_t jb = item % j_blocks, kv = (item / j_blocks) % s.KV, b = item / j_blocks / s.KV;
    const int64_t j0 = jb * kBlock, j1 = std::min(s.T, j0 + kBlock);
    std::vector<T> dk_acc((j1 - j0) * s.D, T(0)), dv_acc((j1 - j0) * s.D, T(0));
    // key row j += weight * (dS q, P dout) of query t's heads at `slot`
    auto take = [&](int64_t j, int64_t t, int64_t slot, T weight) {
      const int64_t at = slot_major(s, slot, b, t) + kv * s.G;  // in P and dS
      const int64_t row = (b * s.T + t) * s.H + kv * s.G;        // in q and dout
      T* dk_j = &dk_acc[(j - j0) * s.D];
      T* dv_j = &dv_acc[(j - j0) * s.D];
      for (int64_t g0 = 0; g0 < s.G; g0 += kG) {
        T a[kG], c[kG];
        bool any = false;
        for (int g = 0; g < kG; ++g) {
          a[g] = weight * ds_all[at + g0 + g];
          c[g] = weight * probs[at + g0 + g];
          any = any || a[g] != 0 || c[g] != 0;
        }
        if (!any) continue;
        const T* qr = q + (row + g0) * s.D;
        const T* dr = dout + (row + g0) * s.D;
        for (int64_t i = 0; i < s.D; i += W) {
          const int64_t n = s.D - i;
          Vec<T> dk_v = load(dk_j + i, n), dv_v = load(dv_j + i, n);
          for (int g = 0; g < kG; ++g) {
            dk_v = at::vec::fmadd(Vec<T>(a[g]), load(qr + g * s.D + i, n), dk_v);
            dv_v = at::vec::fmadd(Vec<T>(c[g]), load(dr + g * s.D + i, n), dv_v);
          }
          dk_v.store(dk_j + i, std::min(W, n));
          dv_v.store(dv_j + i, std::min(W, n));
        }
      }
    };
    if (reader_ptr) {
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t e = reader_ptr[j]; e < reader_ptr[j + 1]; ++e) {
          const int64_t first = reader_block[e] * s.block_size;
          const int64_t last = std::min(s.T, first + s.block_size);
          for (int64_t t = std::max(first, j + s.min_abs); t < last; ++t) {
            take(j, t, reader_slot[e], 1);
          }
        }
      }
    }
    for (int64_t m = 0; m < s.M; ++m) {
      for (int64_t j = j0; j < j1 && j + slots.exact[m] < s.T; ++j) {
        take(j, j + slots.exact[m], s.A + m, 1);
      }
    }
    for (int64_t r = 0; r < s.R; ++r) {
      const int64_t lo = slots.lo[r], slot = s.A + s.M + r;
      const T f = T(slots.frac[r]);
      for (int64_t j = j0; j < j1; ++j) {
        if (j + lo < s.T) take(j, j + lo, slot, j == 0 ? T(1) : T(1) - f);
        if (j + lo + 1 < s.T) take(j, j + lo + 1, slot, f);
      }
    }
    const Vec<T> scale_v(scale);
    for (int64_t j = j0; j < j1; ++j) {
      T* dk_row = dk + ((b * s.T + j) * s.KV + kv) * s.D;
      T* dv_row = dv + ((b * s.T + j) * s.KV + kv) * s.D;
      for (int64_t i = 0; i < s.D; i += W) {
        const int64_t n = std::min(W, s.D - i);
        (load(&dk_acc[(j - j0) * s.D + i], n) * scale_v).store(dk_row + i, n);
        load(&dv_acc[(j - j0) * s.D + i], n).store(dv_row + i, n);
      }
    }
  });
}

// The largest tile of heads that divides G: 8, 4, 2 or 1 heads share each row they read.
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

}  // namespace

std::vector<torch::Tensor> forward(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                   torch::Tensor exact, torch::Tensor lo, torch::Tensor frac,
                                   torch::Tensor block_keys, int64_t block_size, int64_t min_abs,
                                   int64_t threads) {
  check(q, q, "q");
  check(k, q, "k");
  check(v, q, "v");
  const Shape s = shape_of(q, k, exact, lo, block_keys, block_size, min_abs);
  const Slots slots = slots_of(exact, lo, frac, block_keys);
  check_slots(s, slots);
  auto out = torch::empty_like(q);
  auto probs = torch::empty({s.S, s.B, s.T, s.H}, q.options());  // slot-major
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_forward", [&] {
    with_tile(s.G, [&](auto tile) {
      forward_impl<scalar_t, decltype(tile)::value>(
          s, slots, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
          out.data_ptr<scalar_t>(), probs.data_ptr<scalar_t>(), threads);
    });
  });
  return {out, probs};
}

std::vector<torch::Tensor> backward(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                    torch::Tensor out, torch::Tensor dout, torch::Tensor probs,
                                    torch::Tensor exact, torch::Tensor lo, torch::Tensor frac,
                                    torch::Tensor block_keys, int64_t block_size, int64_t min_abs,
                                    torch::Tensor reader_ptr, torch::Tensor reader_block,
                                    torch::Tensor reader_slot, int64_t threads) {
  for (auto* x : {&k, &v, &out, &dout, &probs}) check(*x, q, "input");
  const Shape s = shape_of(q, k, exact, lo, block_keys, block_size, min_abs);
  const Slots slots = slots_of(exact, lo, frac, block_keys);
  check_slots(s, slots);
  const int64_t items = s.B * s.KV * ((s.T + kBlock - 1) / kBlock);
  auto ds = torch::empty_like(probs);
  auto dq = torch::empty_like(q);
  auto dk = torch::empty_like(k);
  auto dv = torch::empty_like(v);
  auto dfrac_items = torch::empty({items, s.R}, q.options());
  const bool readers = reader_ptr.numel() > 0;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_backward", [&] {
    with_tile(s.G, [&](auto tile) {
      constexpr int kG = decltype(tile)::value;
      query_pass<scalar_t, kG>(s, slots, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                               v.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                               dout.data_ptr<scalar_t>(), probs.data_ptr<scalar_t>(),
                               ds.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(),
                               dfrac_items.data_ptr<scalar_t>(), threads);
      key_pass<scalar_t, kG>(s, slots, q.data_ptr<scalar_t>(), dout.data_ptr<scalar_t>(),
                             probs.data_ptr<scalar_t>(), ds.data_ptr<scalar_t>(),
                             readers ? reader_ptr.data_ptr<int64_t>() : nullptr,
                             readers ? reader_block.data_ptr<int64_t>() : nullptr,
                             readers ? reader_slot.data_ptr<int64_t>() : nullptr,
                             dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(), threads);
    });
  });
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
// (1 - frac) lo + frac hi. Returns out (B, H, D).
std::vector<torch::Tensor> decode_step(torch::Tensor q, torch::Tensor ring_k, torch::Tensor ring_v,
                                       int64_t position, torch::Tensor back, torch::Tensor first,
                                       torch::Tensor frac, torch::Tensor block_keys,
                                       int64_t block_size, int64_t min_abs) {
  TORCH_CHECK(q.dim() == 3 && ring_k.dim() == 4, "decode_step: q (B, H, D), rings (B, KV, C, D)");
  for (auto* x : {&q, &ring_k, &ring_v}) check(*x, q, "decode_step input");
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2), KV = ring_k.size(1);
  const int64_t C = ring_k.size(2), G = H / KV;
  const int64_t R = frac.numel(), M = first.numel() - R, A = block_keys.numel() ? block_keys.size(1) : 0;
  TORCH_CHECK(back.numel() == M + 2 * R, "decode_step: back must hold M + 2R distances");
  const int64_t* back_p = back.data_ptr<int64_t>();
  const int64_t* first_p = first.data_ptr<int64_t>();
  const int64_t n_rows = M + 2 * R + A, n_slots = M + R + A;
  std::vector<int64_t> rows(n_rows);
  std::vector<char> valid(n_slots);
  for (int64_t i = 0; i < M + 2 * R; ++i) rows[i] = std::max<int64_t>(position - back_p[i], 0) % C;
  for (int64_t i = 0; i < M + R; ++i) valid[i] = position >= first_p[i];
  if (A) {
    const int64_t* keys = block_keys.data_ptr<int64_t>() + (position / block_size) * A;
    for (int64_t a = 0; a < A; ++a) {
      rows[M + 2 * R + a] = std::max<int64_t>(keys[a], 0) % C;
      valid[M + R + a] = keys[a] >= 0 && position - keys[a] >= min_abs;
    }
  }
  auto out = torch::empty_like(q);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_decode_step", [&] {
    using T = scalar_t;
    const T scale = T(1) / std::sqrt(T(D));
    const T neg_inf = -std::numeric_limits<T>::infinity();
    const double* frac_p = frac.numel() ? frac.data_ptr<double>() : nullptr;
    const T* qp = q.data_ptr<T>();
    const T* kp = ring_k.data_ptr<T>();
    const T* vp = ring_v.data_ptr<T>();
    T* op = out.data_ptr<T>();
    at::parallel_for(0, B * KV, 1, [&](int64_t begin, int64_t end) {
      std::vector<T> row_scores(G * n_rows), probs(G * n_slots), weights(G * n_rows);
      std::vector<const T*> k_rows(n_rows), v_rows(n_rows);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / KV, kv = item % KV;
        for (int64_t i = 0; i < n_rows; ++i) {
          k_rows[i] = kp + ((b * KV + kv) * C + rows[i]) * D;
          v_rows[i] = vp + ((b * KV + kv) * C + rows[i]) * D;
        }
        const T* qg = qp + (b * H + kv * G) * D;  // the group's G query rows
        for (int64_t g = 0; g < G; ++g) {
          for (int64_t i = 0; i < n_rows; ++i) row_scores[g * n_rows + i] = dot(qg + g * D, k_rows[i], D) * scale;
          T* p = &probs[g * n_slots];
          const T* sc = &row_scores[g * n_rows];
          for (int64_t m = 0; m < M; ++m) p[m] = sc[m];
          for (int64_t r = 0; r < R; ++r) {
            const T f = T(frac_p[r]);
            p[M + r] = sc[M + r] + f * (sc[M + R + r] - sc[M + r]);
          }
          for (int64_t a = 0; a < A; ++a) p[M + R + a] = sc[M + 2 * R + a];
          for (int64_t j = 0; j < n_slots; ++j) if (!valid[j]) p[j] = neg_inf;
          softmax_row(p, n_slots);
          T* w = &weights[g * n_rows];
          for (int64_t m = 0; m < M; ++m) w[m] = p[m];
          for (int64_t r = 0; r < R; ++r) {
            const T f = T(frac_p[r]);
            w[M + r] = p[M + r] * (T(1) - f);
            w[M + R + r] = p[M + r] * f;
          }
          for (int64_t a = 0; a < A; ++a) w[M + 2 * R + a] = p[M + R + a];
        }
        T* og = op + (b * H + kv * G) * D;
        constexpr int64_t W = Vec<T>::size();
        for (int64_t g = 0; g < G; ++g) {
          const T* w = &weights[g * n_rows];
          for (int64_t i = 0; i < D; i += W) {
            Vec<T> acc(T(0));
            for (int64_t r = 0; r < n_rows; ++r) {
              if (w[r] != 0) acc = at::vec::fmadd(Vec<T>(w[r]), load(v_rows[r] + i, D - i), acc);
            }
            acc.store(og + g * D + i, std::min(W, D - i));
          }
        }
      }
    });
  });
  return {out};
}

// ------------------------------------------------------------------------------ narrow weights
// y (M, N) = x (M, K) w (N, K)^T for float32 x and weights stored narrower (bfloat16, or int8
// with a float32 scale per output channel), summed in float32: a decoding step reads each
// weight once, and narrower weights are fewer bytes. A tile of R rows of x (R <= 4) and
// kWeightRows rows of w keeps its R x kWeightRows sums in registers: each widened weight
// vector serves R rows of x, and the weight rows are read side by side (their loads in
// flight at once). Each sum runs over k in order, whatever the tile, so results do not
// depend on M or the thread count. Each weight load also prefetches the bytes 16 KB on: the
// hardware's prefetcher stops at every 4 KB page (measured on a Xeon: bfloat16 at M = 1,
// one thread, 7 -> 14 GB/s from memory).
constexpr int kWeightRows = 4;
constexpr int64_t kPrefetchBytes = 16384;

// Blocks of kWeightRows rows of w (row stride ld) split between torch's threads; in each,
// tile.template run<R>(x rows, rows of w, first output column, out, cols) over x's rows, at
// most 4 at a time. An edge block repeats its last weight row (its extra sums are dropped).
template <typename T, typename Tile>
void narrow_product(int64_t M, int64_t N, int64_t K, int64_t ld, const float* xp, const T* wp,
                    float* yp, const Tile& tile) {
  const int64_t blocks = (N + kWeightRows - 1) / kWeightRows;
  at::parallel_for(0, blocks, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t n0 = b * kWeightRows, cols = std::min<int64_t>(kWeightRows, N - n0);
      const T* w[kWeightRows];
      for (int c = 0; c < kWeightRows; ++c) w[c] = wp + (n0 + std::min<int64_t>(c, cols - 1)) * ld;
      for (int64_t m = 0; m < M;) {
        const float* x = xp + m * K;
        float* out = yp + m * N + n0;
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
        __builtin_prefetch(w[c] + ahead + k);  // a hint: never faults, even past w's end
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
        __builtin_prefetch(w[c] + kPrefetchBytes + k);  // a hint: never faults
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

torch::Tensor bf16_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "bf16_linear: x (M, K), w (N, K)");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kBFloat16,
              "bf16_linear: float32 x and bfloat16 w");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && x.device().is_cpu() && w.device().is_cpu(),
              "bf16_linear: contiguous CPU tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({M, N}, x.options());
  narrow_product(M, N, K, K, x.data_ptr<float>(), w.data_ptr<c10::BFloat16>(), y.data_ptr<float>(),
                 Bf16Tile{K, N});
  return y;
}

// int8: w ~ scale * q per output channel (weight-only int8, a quarter of float32's bytes);
// rows of w may be padded (row stride >= K).
torch::Tensor int8_linear(torch::Tensor x, torch::Tensor w, torch::Tensor scale) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "int8_linear: x (M, K), w (N, K)");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kChar &&
                  scale.scalar_type() == torch::kFloat && scale.numel() == w.size(0),
              "int8_linear: float32 x, int8 w, float32 scale (N,)");
  TORCH_CHECK(x.is_contiguous() && w.stride(1) == 1 && w.stride(0) >= w.size(1) && scale.is_contiguous() &&
                  x.device().is_cpu() && w.device().is_cpu() && scale.device().is_cpu(),
              "int8_linear: CPU tensors, x and scale contiguous, w's rows contiguous");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({M, N}, x.options());
  narrow_product(M, N, K, w.stride(0), x.data_ptr<float>(), w.data_ptr<int8_t>(), y.data_ptr<float>(),
                 Int8Tile{K, N, scale.data_ptr<float>()});
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "sparse attention over key slots, forward (CPU)");
  m.def("backward", &backward, "sparse attention over key slots, backward (CPU)");
  m.def("decode_step", &decode_step, "one decoding position over a ring of cached rows (CPU)");
  m.def("bf16_linear", &bf16_linear, "float32 x times bfloat16 weights, float32 sums (CPU)");
  m.def("int8_linear", &int8_linear, "float32 x times int8 weights and per-row scales (CPU)");
}
