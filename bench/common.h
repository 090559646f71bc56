/* common.h — shared harness of the lab workloads in bench/: command-line options, clock, deterministic
 * random numbers, per-operation latency histograms (log-linear buckets, no allocation when recording),
 * the progress/duration thread, and the machine-parsable output (allocator-check, RESULT, PROGRESS, HIST).
 *
 * Every workload accepts these flags before or between its positional arguments:
 *   -t N    worker threads (threaded workloads)      -d SEC  run for SEC seconds instead of a fixed count
 *   -l      record per-operation latency             -H      also dump the histogram buckets (implies -l)
 *   -p MS   print a PROGRESS line every MS ms
 * Positional numbers accept K, M and G suffixes (powers of 1024). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct bench_opts {
  const char *name;     /* workload name, printed as workload= */
  int threads;          /* -t */
  double duration_s;    /* -d; 0 = count-driven run */
  bool latency;         /* -l or -H */
  bool dump_hist;       /* -H */
  unsigned progress_ms; /* -p; 0 = no progress lines */
  int npos;             /* positional arguments left after the flags */
  char **pos;
};
extern struct bench_opts bench;

/* Parse the flags, print the allocator-check line. `usage` is printed on a bad command line. */
void bench_init(const char *name, int argc, char **argv, int default_threads, const char *usage);
/* Positional argument `idx` as a number (K/M/G suffixes), or `def` when absent. Exits on garbage. */
uint64_t bench_arg(int idx, uint64_t def);
/* Positional argument `idx` as a comma-separated list of numbers; returns the count (at most max). */
int bench_arg_list(int idx, const char *def, uint64_t *out, int max);
/* The loop bound to use: `count`, or UINT64_MAX when the run is duration-driven (-d). */
uint64_t bench_limit(uint64_t count);
/* Print an error and exit with status 2. */
void bench_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static inline uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: small, fast, and the same sequence on every machine. */
static inline uint64_t rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* Uniform in [0, n) without division (Lemire's multiply-shift). */
static inline uint64_t rng_below(uint64_t *state, uint64_t n) {
  return (uint64_t)(((unsigned __int128)rng_next(state) * n) >> 64);
}
/* Uniform in [lo, hi]. */
static inline uint64_t rng_range(uint64_t *state, uint64_t lo, uint64_t hi) {
  return lo + rng_below(state, hi - lo + 1);
}

/* Latency clock: the invariant TSC scaled to ns when the CPU has one (1-cycle resolution, ~10 ns to read),
 * else CLOCK_MONOTONIC. bench_lat_mult is 0 when the TSC is not used. */
extern uint64_t bench_lat_mult;
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t bench_lat_now(void) { return bench_lat_mult ? __rdtsc() : bench_now_ns(); }
#else
static inline uint64_t bench_lat_now(void) { return bench_now_ns(); }
#endif
static inline uint64_t bench_lat_ns(uint64_t delta) {
  return bench_lat_mult ? (uint64_t)(((unsigned __int128)delta * bench_lat_mult) >> 32) : delta;
}

/* Keep the compiler from eliding an allocation whose result is otherwise unused. */
static inline void bench_escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

/* ---- Latency histogram: exact below 32 ns, then 32 sub-buckets per power of two (< 3.2 % error). ---- */
#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
  uint64_t count;
  uint64_t max;
  uint64_t bucket[HIST_BUCKETS];
};

static inline unsigned hist_index(uint64_t v) {
  if (v < HIST_SUB) return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v);
  unsigned sub = (unsigned)(v >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1);
  return (e - HIST_SUB_BITS + 1) * HIST_SUB + sub;
}
static inline void hist_add(struct hist *h, uint64_t v) {
  h->bucket[hist_index(v)]++;
  h->count++;
  if (v > h->max) h->max = v;
}
/* Lowest value and width of bucket i. */
void hist_bounds(unsigned i, uint64_t *lo, uint64_t *width);
/* A zeroed histogram when latency recording is on (-l), else NULL. Call outside the timed path. */
struct hist *bench_hist_new(void);
/* Add h into the process-wide histogram (thread-safe) and release it. NULL is ignored. */
void bench_hist_merge(struct hist *h);

/* Time `stmt` into histogram `h` when recording is on; just run it otherwise. */
#define BENCH_TIMED(h, stmt)                                     \
  do {                                                           \
    if (h) {                                                     \
      uint64_t bench_t0_ = bench_lat_now();                      \
      stmt;                                                      \
      hist_add((h), bench_lat_ns(bench_lat_now() - bench_t0_));  \
    } else {                                                     \
      stmt;                                                      \
    }                                                            \
  } while (0)

/* ---- Run control ---------------------------------------------------------------------------------- */
extern _Atomic uint64_t bench_ops_done;
extern atomic_bool bench_stop_flag;

/* Account n finished operations (for PROGRESS lines); true when a duration-driven run must stop. */
static inline bool bench_tick(uint64_t n) {
  atomic_fetch_add_explicit(&bench_ops_done, n, memory_order_relaxed);
  return atomic_load_explicit(&bench_stop_flag, memory_order_relaxed);
}
static inline bool bench_stopping(void) {
  return atomic_load_explicit(&bench_stop_flag, memory_order_relaxed);
}

/* Start the clock (and the progress/duration thread when -p or -d was given). */
void bench_start(void);
/* Stop the clock; returns the elapsed seconds. */
double bench_stop(void);
/* Print the main RESULT line for `ops` operations over the measured time, the Throughput line, the
 * latency percentiles and (with -H) the histogram buckets. `extra` is appended to the RESULT line. */
void bench_report(uint64_t ops, const char *extra_fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print one more "RESULT ..." line. */
void bench_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* BENCH_COMMON_H */
