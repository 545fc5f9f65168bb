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
inline T dot(const T* a, const T* b, int64_t n) {
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

template <typename T>
inline void axpy(T alpha, const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

template <typename T>
inline void blend(const T* lo, const T* hi, T frac, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = lo[i] + frac * (hi[i] - lo[i]);
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

// ------------------------------------------------------------------------------ forward
template <typename T>
void forward_impl(const Shape& s, const Slots& slots, const T* q, const T* k, const T* v, T* out,
                  T* probs, int64_t threads) {
  const T scale = T(1) / std::sqrt(T(s.D));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t t_blocks = (s.T + kBlock - 1) / kBlock;
  parallel_items(s.B * s.KV * t_blocks, threads, [&](int64_t item) {
    const int64_t tb = item % t_blocks, kv = (item / t_blocks) % s.KV, b = item / t_blocks / s.KV;
    std::vector<T> key_rows(s.R * s.D), value_rows(s.R * s.D), score(s.G * s.S);
    std::vector<const T*> keys(s.S), values(s.S);
    for (int64_t t = tb * kBlock; t < std::min(s.T, (tb + 1) * kBlock); ++t) {
      // the rows this position reads, shared by the G heads; nullptr: not valid here
      const T* k_base = k + (b * s.T * s.KV + kv) * s.D;
      const T* v_base = v + (b * s.T * s.KV + kv) * s.D;
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
        blend(k_base + (t - lo) * row_stride, k_base + hi * row_stride, f, &key_rows[r * s.D], s.D);
        blend(v_base + (t - lo) * row_stride, v_base + hi * row_stride, f, &value_rows[r * s.D],
              s.D);
        keys[slot] = &key_rows[r * s.D];
        values[slot] = &value_rows[r * s.D];
      }
      for (int64_t g = 0; g < s.G; ++g) {
        const int64_t h = kv * s.G + g;
        const T* qv = q + ((b * s.T + t) * s.H + h) * s.D;
        T* sc = &score[g * s.S];
        T top = neg_inf;
        for (int64_t j = 0; j < s.S; ++j) {
          sc[j] = keys[j] ? dot(qv, keys[j], s.D) * scale : neg_inf;
          top = std::max(top, sc[j]);
        }
        T total = 0;
        for (int64_t j = 0; j < s.S; ++j) {
          sc[j] = keys[j] ? std::exp(sc[j] - top) : T(0);
          total += sc[j];
        }
        const T inv = total > 0 ? T(1) / total : T(0);
        T* o = out + ((b * s.T + t) * s.H + h) * s.D;
        T* p = probs + ((b * s.T + t) * s.H + h) * s.S;
        std::fill(o, o + s.D, T(0));
        for (int64_t j = 0; j < s.S; ++j) {
          p[j] = sc[j] * inv;
          if (values[j] && p[j] != 0) axpy(p[j], values[j], o, s.D);
        }
      }
    }
  });
}

// ------------------------------------------------------------------------------ backward
// Pass 1, per query: dS, dQ and each item's share of d(frac).
template <typename T>
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
    T* dfrac = dfrac_items + item * s.R;
    std::fill(dfrac, dfrac + s.R, T(0));
    const int64_t row_stride = s.KV * s.D;
    const T* k_base = k + (b * s.T * s.KV + kv) * s.D;
    const T* v_base = v + (b * s.T * s.KV + kv) * s.D;
    for (int64_t t = tb * kBlock; t < std::min(s.T, (tb + 1) * kBlock); ++t) {
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
        const T *k_lo = k_base + (t - lo) * row_stride, *k_hi = k_base + hi * row_stride;
        const T *v_lo = v_base + (t - lo) * row_stride, *v_hi = v_base + hi * row_stride;
        for (int64_t i = 0; i < s.D; ++i) {
          k_diff[r * s.D + i] = k_hi[i] - k_lo[i];
          v_diff[r * s.D + i] = v_hi[i] - v_lo[i];
          key_rows[r * s.D + i] = k_lo[i] + f * k_diff[r * s.D + i];
          value_rows[r * s.D + i] = v_lo[i] + f * v_diff[r * s.D + i];
        }
        keys[slot] = &key_rows[r * s.D];
        values[slot] = &value_rows[r * s.D];
      }
      for (int64_t g = 0; g < s.G; ++g) {
        const int64_t row = (b * s.T + t) * s.H + kv * s.G + g;
        const T* qv = q + row * s.D;
        const T* dov = dout + row * s.D;
        const T* p = probs + row * s.S;
        T* ds = ds_all + row * s.S;
        T* dqv = dq + row * s.D;
        std::fill(dqv, dqv + s.D, T(0));
        const T delta = dot(dov, out + row * s.D, s.D);  // sum_j p_j dP_j
        for (int64_t j = 0; j < s.S; ++j) {
          if (!keys[j] || p[j] == 0) {
            ds[j] = 0;
            continue;
          }
          ds[j] = p[j] * (dot(dov, values[j], s.D) - delta);
          axpy(ds[j] * scale, keys[j], dqv, s.D);
        }
        for (int64_t r = 0; r < s.R; ++r) {
          const int64_t j = s.A + s.M + r;
          if (!keys[j] || p[j] == 0) continue;
          // the rung's score moves by scale q.(k_hi - k_lo), its value by v_hi - v_lo
          const T score_slope = scale * dot(qv, &k_diff[r * s.D], s.D);
          const T value_slope = dot(dov, &v_diff[r * s.D], s.D);
          dfrac[r] += ds[j] * score_slope + p[j] * value_slope;
        }
      }
    }
  });
}

// Pass 2, per key row j: the queries that read it are j + d for each relative slot (a rung's
// lower tap at j + lo, its upper tap at j + lo + 1, and at j = 0 also query lo's upper tap,
// whose row -1 is replaced by row 0), and for absolute keys the queries of the blocks that
// drew it (reader_ptr / reader_block / reader_slot: the blocks and slots reading each key).
template <typename T>
void key_pass(const Shape& s, const Slots& slots, const T* q, const T* dout, const T* probs,
              const T* ds_all, const int64_t* reader_ptr, const int64_t* reader_block,
              const int64_t* reader_slot, T* dk, T* dv, int64_t threads) {
  const T scale = T(1) / std::sqrt(T(s.D));
  const int64_t j_blocks = (s.T + kBlock - 1) / kBlock;
  parallel_items(s.B * s.KV * j_blocks, threads, [&](int64_t item) {
    const int64_t jb = item % j_blocks, kv = (item / j_blocks) % s.KV, b = item / j_blocks / s.KV;
    std::vector<T> dkv(s.D), dvv(s.D);
    auto take = [&](int64_t t, int64_t slot, T weight) {
      for (int64_t g = 0; g < s.G; ++g) {
        const int64_t row = (b * s.T + t) * s.H + kv * s.G + g;
        const T ds = ds_all[row * s.S + slot], p = probs[row * s.S + slot];
        if (ds != 0) axpy(weight * ds, q + row * s.D, dkv.data(), s.D);
        if (p != 0) axpy(weight * p, dout + row * s.D, dvv.data(), s.D);
      }
    };
    for (int64_t j = jb * kBlock; j < std::min(s.T, (jb + 1) * kBlock); ++j) {
      std::fill(dkv.begin(), dkv.end(), T(0));
      std::fill(dvv.begin(), dvv.end(), T(0));
      if (reader_ptr) {
        for (int64_t e = reader_ptr[j]; e < reader_ptr[j + 1]; ++e) {
          const int64_t first = reader_block[e] * s.block_size;
          const int64_t last = std::min(s.T, first + s.block_size);
          for (int64_t t = std::max(first, j + s.min_abs); t < last; ++t) take(t, reader_slot[e], 1);
        }
      }
      for (int64_t m = 0; m < s.M; ++m) {
        const int64_t t = j + slots.exact[m];
        if (t < s.T) take(t, s.A + m, 1);
      }
      for (int64_t r = 0; r < s.R; ++r) {
        const int64_t lo = slots.lo[r], slot = s.A + s.M + r;
        const T f = T(slots.frac[r]);
        if (j + lo < s.T) take(j + lo, slot, j == 0 ? T(1) : T(1) - f);
        if (j + lo + 1 < s.T) take(j + lo + 1, slot, f);
      }
      T* dk_row = dk + ((b * s.T + j) * s.KV + kv) * s.D;
      T* dv_row = dv + ((b * s.T + j) * s.KV + kv) * s.D;
      for (int64_t i = 0; i < s.D; ++i) {
        dk_row[i] = dkv[i] * scale;
        dv_row[i] = dvv[i];
      }
    }
  });
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
  auto probs = torch::empty({s.B, s.T, s.H, s.S}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "lit_sparse_forward", [&] {
    forward_impl<scalar_t>(s, slots, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                           v.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                           probs.data_ptr<scalar_t>(), threads);
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
    query_pass<scalar_t>(s, slots, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                         v.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                         dout.data_ptr<scalar_t>(), probs.data_ptr<scalar_t>(),
                         ds.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(),
                         dfrac_items.data_ptr<scalar_t>(), threads);
    key_pass<scalar_t>(s, slots, q.data_ptr<scalar_t>(), dout.data_ptr<scalar_t>(),
                       probs.data_ptr<scalar_t>(), ds.data_ptr<scalar_t>(),
                       readers ? reader_ptr.data_ptr<int64_t>() : nullptr,
                       readers ? reader_block.data_ptr<int64_t>() : nullptr,
                       readers ? reader_slot.data_ptr<int64_t>() : nullptr,
                       dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(), threads);
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

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "sparse attention over key slots, forward (CPU)");
  m.def("backward", &backward, "sparse attention over key slots, backward (CPU)");
}
