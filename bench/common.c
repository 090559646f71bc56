/* common.c — implementation of the shared workload harness declared in common.h: option parsing, the
 * allocator check, the progress/duration thread, histogram merging and the RESULT/HIST output. */
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_POS 32

struct bench_opts bench;
uint64_t bench_lat_mult;
_Atomic uint64_t bench_ops_done;
atomic_bool bench_stop_flag;

static char *pos_args[MAX_POS];
static const char *usage_text;
static char stdout_buf[1 << 14];

static uint64_t t_start, t_end;
static struct hist merged;
static pthread_mutex_t merge_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_t ticker;
static bool ticker_running;
static bool ticker_quit;
static pthread_mutex_t ticker_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ticker_cond;

void bench_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", bench.name ? bench.name : "bench");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static void usage_exit(const char *why) {
  fprintf(stderr, "%s: %s\nusage: %s\n"
                  "flags: -t THREADS  -d SECONDS  -l (latency)  -H (latency + histogram dump)  -p MS (progress)\n",
          bench.name, why, usage_text);
  exit(2);
}

static uint64_t parse_number(const char *s, bool *ok) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  *ok = errno == 0 && end != s && s[0] != '-';
  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  default: break;
  }
  if (*end != '\0') *ok = false;
  return (uint64_t)v;
}

static const char *flag_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) usage_exit("a flag is missing its value");
  return argv[++*i];
}

static void print_allocator_check(void) {
  void *sym = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info;
  if (sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] != '\0')
    printf("allocator-check: %s\n", info.dli_fname);
  else
    printf("allocator-check: unknown\n");
}

/* True when /proc/cpuinfo reports a TSC that ticks at a constant rate through every power state. */
static bool tsc_invariant(void) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "flags", 5) != 0) continue;
    constant = strstr(line, " constant_tsc") != NULL;
    nonstop = strstr(line, " nonstop_tsc") != NULL;
    break;
  }
  fclose(f);
  return constant && nonstop;
}

/* Measure the TSC against CLOCK_MONOTONIC over 20 ms and set the ns-per-cycle factor (32.32 fixed point). */
static void calibrate_latency_clock(void) {
#if defined(__x86_64__)
  if (!tsc_invariant()) return;
  uint64_t n0 = bench_now_ns(), c0 = __rdtsc();
  struct timespec pause = {0, 20000000};
  nanosleep(&pause, NULL);
  uint64_t n1 = bench_now_ns(), c1 = __rdtsc();
  if (c1 > c0 && n1 > n0) bench_lat_mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (c1 - c0));
#endif
}

void bench_init(const char *name, int argc, char **argv, int default_threads, const char *usage) {
  setvbuf(stdout, stdout_buf, _IOLBF, sizeof stdout_buf);
  bench.name = name;
  bench.threads = default_threads;
  usage_text = usage;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool ok = true;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      printf("usage: %s\n", usage);
      exit(0);
    } else if (strcmp(a, "-t") == 0) {
      uint64_t t = parse_number(flag_value(argc, argv, &i), &ok);
      if (!ok || t < 1 || t > 1024) usage_exit("-t wants 1..1024");
      bench.threads = (int)t;
    } else if (strcmp(a, "-d") == 0) {
      char *end;
      const char *v = flag_value(argc, argv, &i);
      bench.duration_s = strtod(v, &end);
      if (*end != '\0' || bench.duration_s <= 0) usage_exit("-d wants a positive number of seconds");
    } else if (strcmp(a, "-p") == 0) {
      uint64_t ms = parse_number(flag_value(argc, argv, &i), &ok);
      if (!ok || ms < 1 || ms > 3600000) usage_exit("-p wants 1..3600000 milliseconds");
      bench.progress_ms = (unsigned)ms;
    } else if (strcmp(a, "-l") == 0) {
      bench.latency = true;
    } else if (strcmp(a, "-H") == 0) {
      bench.latency = bench.dump_hist = true;
    } else if (a[0] == '-' && a[1] != '\0') {
      usage_exit("unknown flag");
    } else {
      if (bench.npos == MAX_POS) usage_exit("too many arguments");
      pos_args[bench.npos++] = argv[i];
    }
  }
  bench.pos = pos_args;
  if (bench.latency) calibrate_latency_clock();
  print_allocator_check();
}

uint64_t bench_arg(int idx, uint64_t def) {
  if (idx >= bench.npos) return def;
  bool ok;
  uint64_t v = parse_number(bench.pos[idx], &ok);
  if (!ok) usage_exit("arguments must be numbers (K/M/G suffixes allowed)");
  return v;
}

int bench_arg_list(int idx, const char *def, uint64_t *out, int max) {
  const char *src = idx < bench.npos ? bench.pos[idx] : def;
  char buf[512];
  if (strlen(src) >= sizeof buf) usage_exit("list too long");
  strcpy(buf, src);
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    bool ok;
    if (n == max) usage_exit("list has too many entries");
    out[n++] = parse_number(tok, &ok);
    if (!ok) usage_exit("list entries must be numbers");
  }
  if (n == 0) usage_exit("empty list");
  return n;
}

uint64_t bench_limit(uint64_t count) { return bench.duration_s > 0 ? UINT64_MAX : count; }

/* ---- Histograms ---------------------------------------------------------------------------------- */

void hist_bounds(unsigned i, uint64_t *lo, uint64_t *width) {
  if (i < HIST_SUB) {
    *lo = i;
    *width = 1;
    return;
  }
  unsigned e = i / HIST_SUB + HIST_SUB_BITS - 1;
  uint64_t w = (uint64_t)1 << (e - HIST_SUB_BITS);
  *lo = ((uint64_t)1 << e) + (uint64_t)(i % HIST_SUB) * w;
  *width = w;
}

struct hist *bench_hist_new(void) {
  if (!bench.latency) return NULL;
  struct hist *h = calloc(1, sizeof *h);
  if (h == NULL) bench_die("out of memory for a histogram");
  return h;
}

void bench_hist_merge(struct hist *h) {
  if (h == NULL) return;
  pthread_mutex_lock(&merge_lock);
  for (unsigned i = 0; i < HIST_BUCKETS; i++) merged.bucket[i] += h->bucket[i];
  merged.count += h->count;
  if (h->max > merged.max) merged.max = h->max;
  pthread_mutex_unlock(&merge_lock);
  free(h);
}

/* Value at quantile q: the middle of the bucket holding it, never above the true maximum. */
static uint64_t hist_quantile(const struct hist *h, double q) {
  if (h->count == 0) return 0;
  uint64_t rank = (uint64_t)(q * (double)h->count + 0.999999);
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < HIST_BUCKETS; i++) {
    seen += h->bucket[i];
    if (seen >= rank) {
      uint64_t lo, w;
      hist_bounds(i, &lo, &w);
      uint64_t mid = lo + (w - 1) / 2;
      return mid < h->max ? mid : h->max;
    }
  }
  return h->max;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

/* Typical (median) cost in ns of a back-to-back pair of latency-clock reads: what the clock itself adds to
 * every recorded latency, including its granularity. */
static uint64_t timer_overhead_ns(void) {
  enum { N = 2001 };
  static uint64_t d[N];
  for (int i = 0; i < N; i++) {
    uint64_t a = bench_lat_now(), b = bench_lat_now();
    d[i] = b - a;
  }
  qsort(d, N, sizeof d[0], cmp_u64);
  return bench_lat_ns(d[N / 2]);
}

/* ---- Progress and duration thread ------------------------------------------------------------------ */

static void *ticker_main(void *arg) {
  (void)arg;
  uint64_t start = t_start;
  uint64_t period = bench.progress_ms ? (uint64_t)bench.progress_ms * 1000000u : UINT64_MAX;
  uint64_t end = bench.duration_s > 0 ? start + (uint64_t)(bench.duration_s * 1e9) : UINT64_MAX;
  uint64_t next = period == UINT64_MAX ? UINT64_MAX : start + period;
  uint64_t last_ops = 0, last_t = start;
  pthread_mutex_lock(&ticker_lock);
  while (!ticker_quit) {
    uint64_t wake = next < end ? next : end;
    struct timespec ts = {(time_t)(wake / 1000000000u), (long)(wake % 1000000000u)};
    pthread_cond_timedwait(&ticker_cond, &ticker_lock, &ts);
    if (ticker_quit) break;
    uint64_t now = bench_now_ns();
    if (now >= next) {
      uint64_t ops = atomic_load_explicit(&bench_ops_done, memory_order_relaxed);
      double dt = (double)(now - last_t) / 1e9;
      printf("PROGRESS t=%.3f ops=%llu ops_per_sec=%.1f\n", (double)(now - start) / 1e9,
             (unsigned long long)ops, dt > 0 ? (double)(ops - last_ops) / dt : 0.0);
      last_ops = ops;
      last_t = now;
      while (next <= now) next += period;
    }
    if (now >= end) {
      atomic_store(&bench_stop_flag, true);
      end = UINT64_MAX;
      if (period == UINT64_MAX) break;
    }
  }
  pthread_mutex_unlock(&ticker_lock);
  return NULL;
}

void bench_start(void) {
  t_start = bench_now_ns();
  if (bench.progress_ms == 0 && bench.duration_s <= 0) return;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ticker_cond, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&ticker, NULL, ticker_main, NULL) != 0) bench_die("cannot start the progress thread");
  ticker_running = true;
}

double bench_stop(void) {
  t_end = bench_now_ns();
  if (ticker_running) {
    pthread_mutex_lock(&ticker_lock);
    ticker_quit = true;
    pthread_cond_signal(&ticker_cond);
    pthread_mutex_unlock(&ticker_lock);
    pthread_join(ticker, NULL);
    ticker_running = false;
  }
  return (double)(t_end - t_start) / 1e9;
}

/* ---- Output -------------------------------------------------------------------------------------- */

void bench_result(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("RESULT ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
}

/* Peak resident set of this program (VmHWM, KiB). getrusage's ru_maxrss cannot be used by the parent: the
 * kernel carries the pre-exec image's peak (the launcher's) over to the new program. */
static long peak_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

void bench_report(uint64_t ops, const char *extra_fmt, ...) {
  long hwm = peak_rss_kb();
  double secs = (double)(t_end - t_start) / 1e9;
  double rate = secs > 0 ? (double)ops / secs : 0.0;
  printf("RESULT workload=%s threads=%d ops=%llu seconds=%.9f ops_per_sec=%.1f ns_per_op=%.3f", bench.name,
         bench.threads, (unsigned long long)ops, secs, rate, ops ? secs * 1e9 / (double)ops : 0.0);
  if (extra_fmt != NULL && extra_fmt[0] != '\0') {
    va_list ap;
    va_start(ap, extra_fmt);
    putchar(' ');
    vprintf(extra_fmt, ap);
    va_end(ap);
  }
  putchar('\n');
  if (hwm >= 0) printf("RESULT peak_rss_kb=%ld\n", hwm);
  printf("Throughput = %.0f ops/s\n", rate);
  if (!bench.latency) return;
  const struct hist *h = &merged;
  printf("RESULT lat_count=%llu lat_p50_ns=%llu lat_p90_ns=%llu lat_p99_ns=%llu lat_p999_ns=%llu lat_max_ns=%llu "
         "timer_overhead_ns=%llu timer=%s\n",
         (unsigned long long)h->count, (unsigned long long)hist_quantile(h, 0.50),
         (unsigned long long)hist_quantile(h, 0.90), (unsigned long long)hist_quantile(h, 0.99),
         (unsigned long long)hist_quantile(h, 0.999), (unsigned long long)h->max,
         (unsigned long long)timer_overhead_ns(), bench_lat_mult ? "tsc" : "clock_gettime");
  if (!bench.dump_hist) return;
  for (unsigned i = 0; i < HIST_BUCKETS; i++) {
    if (h->bucket[i] == 0) continue;
    uint64_t lo, w;
    hist_bounds(i, &lo, &w);
    printf("HIST %llu %llu %llu\n", (unsigned long long)lo, (unsigned long long)(lo + w),
           (unsigned long long)h->bucket[i]);
  }
}
