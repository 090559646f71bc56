/* realistic.c — workload 10: a data-processing job shaped like a real service. A pool of -t workers takes
 * tasks from a shared counter; each task parses `records` records into a hash map of string keys whose
 * values are vectors of small strings grown by realloc, appends to an output buffer, then hands about 40 %
 * of its entries to other workers (which free them) and frees the rest itself. Most strings are <= 8 bytes
 * and nearly all <= 128 bytes. A few tasks also fill a buffer of hundreds of MiB. `tasks` is per worker, so
 * the work grows with -t. Task contents depend only on the seed and the task number.
 * usage: realistic [-t N] [tasks] [records] [big] [big_mb] [seed]   (defaults 2 workers, 150, 4000, 3, 256, 1) */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 256 /* entries per hand-off batch */

struct vec {
  char **item;
  uint32_t len, cap;
};

struct entry {
  struct entry *next;
  char *key;
  uint64_t hash;
  struct vec values;
};

struct batch {
  struct batch *next;
  int producer;
  uint32_t n;
  struct entry *e[BATCH];
};

struct worker {
  pthread_t tid;
  int id;
  uint64_t ops, frees, remote_frees, objects_out, tasks, big_buffers;
  struct hist *h;
};

static uint64_t n_tasks, n_records, big_every, big_mb, seed;
static _Atomic uint64_t next_task;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct batch *queue;

/* ---- Timed allocation wrappers -------------------------------------------------------------------- */

static void *w_malloc(struct worker *w, size_t n) {
  void *p;
  BENCH_TIMED(w->h, p = malloc(n));
  if (p == NULL) bench_die("malloc(%zu) failed", n);
  w->ops++;
  return p;
}

static void *w_calloc(struct worker *w, size_t n, size_t size) {
  void *p;
  BENCH_TIMED(w->h, p = calloc(n, size));
  if (p == NULL) bench_die("calloc(%zu, %zu) failed", n, size);
  w->ops++;
  return p;
}

static void *w_realloc(struct worker *w, void *old, size_t n) {
  void *p;
  BENCH_TIMED(w->h, p = realloc(old, n));
  if (p == NULL) bench_die("realloc(%zu) failed", n);
  w->ops++;
  return p;
}

static void w_free(struct worker *w, void *p, bool remote) {
  BENCH_TIMED(w->h, free(p));
  w->ops++;
  w->frees++;
  w->remote_frees += remote;
}

/* ---- Data ----------------------------------------------------------------------------------------- */

/* Allocation size of a string: 60 % 1..8 bytes, 37 % 9..128, 2.5 % 129..1024, 0.5 % 1 KiB..16 KiB. */
static size_t string_size(uint64_t *rng) {
  uint64_t u = rng_below(rng, 1000);
  if (u < 600) return (size_t)rng_range(rng, 1, 8);
  if (u < 970) return (size_t)rng_range(rng, 9, 128);
  if (u < 995) return (size_t)rng_range(rng, 129, 1024);
  return (size_t)rng_range(rng, 1025, 16384);
}

static char *make_string(struct worker *w, uint64_t *rng, uint64_t tag) {
  size_t n = string_size(rng);
  char *s = w_malloc(w, n);
  for (size_t i = 0; i + 1 < n; i++) s[i] = (char)('a' + (tag + i) % 26);
  s[n - 1] = '\0';
  return s;
}

static void free_entry(struct worker *w, struct entry *e, bool remote) {
  for (uint32_t i = 0; i < e->values.len; i++) w_free(w, e->values.item[i], remote);
  if (e->values.item != NULL) w_free(w, e->values.item, remote);
  w_free(w, e->key, remote);
  w_free(w, e, remote);
}

static uint32_t entry_objects(const struct entry *e) { return 2 + e->values.len + (e->values.item != NULL); }

/* ---- Hand-off queue: batches of entries freed by a worker other than their producer -------------- */

static void queue_push(struct batch *b) {
  pthread_mutex_lock(&queue_lock);
  b->next = queue;
  queue = b;
  pthread_mutex_unlock(&queue_lock);
}

/* Take one batch produced by someone other than `self` (any batch when self < 0), or NULL. */
static struct batch *queue_take(int self) {
  pthread_mutex_lock(&queue_lock);
  struct batch **link = &queue;
  while (*link != NULL && (*link)->producer == self) link = &(*link)->next;
  struct batch *b = *link;
  if (b != NULL) *link = b->next;
  pthread_mutex_unlock(&queue_lock);
  return b;
}

static void drain_others(struct worker *w) {
  struct batch *b;
  while ((b = queue_take(w->id)) != NULL) {
    for (uint32_t i = 0; i < b->n; i++) free_entry(w, b->e[i], b->producer != w->id);
    w_free(w, b, b->producer != w->id);
  }
}

/* ---- One task --------------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  uint64_t s = x;
  return rng_next(&s);
}

static void run_task(struct worker *w, uint64_t task) {
  uint64_t rng = seed * 0x100000001b3ull ^ mix(task);
  uint64_t nb = 64, size = 0, vocab = n_records / 4 + 1;
  struct entry **bucket = w_calloc(w, nb, sizeof *bucket);
  char *out = NULL;
  size_t out_len = 0, out_cap = 0;

  for (uint64_t r = 0; r < n_records; r++) {
    uint64_t id = rng_below(&rng, vocab), h = mix(id ^ task);
    struct entry *e = bucket[h & (nb - 1)];
    while (e != NULL && e->hash != h) e = e->next;
    if (e == NULL) {
      uint64_t key_rng = h;
      e = w_malloc(w, sizeof *e);
      *e = (struct entry){.key = make_string(w, &key_rng, id), .hash = h, .next = bucket[h & (nb - 1)]};
      bucket[h & (nb - 1)] = e;
      if (++size > nb) { /* grow the table: new bucket array, rehash, free the old one */
        struct entry **nbk = w_calloc(w, nb * 2, sizeof *nbk);
        for (uint64_t i = 0; i < nb; i++) {
          for (struct entry *x = bucket[i], *next; x != NULL; x = next) {
            next = x->next;
            x->next = nbk[x->hash & (nb * 2 - 1)];
            nbk[x->hash & (nb * 2 - 1)] = x;
          }
        }
        w_free(w, bucket, false);
        bucket = nbk;
        nb *= 2;
      }
    }
    if (e->values.len == e->values.cap) {
      e->values.cap = e->values.cap ? e->values.cap * 2 : 2;
      e->values.item = w_realloc(w, e->values.item, e->values.cap * sizeof(char *));
    }
    e->values.item[e->values.len++] = make_string(w, &rng, r);
    if ((r & 15) == 0) { /* the task's output: a string builder grown by realloc */
      size_t klen = strlen(e->key);
      if (out_len + klen + 2 > out_cap) {
        out_cap = out_cap ? out_cap * 2 : 64;
        while (out_cap < out_len + klen + 2) out_cap *= 2;
        out = w_realloc(w, out, out_cap);
      }
      memcpy(out + out_len, e->key, klen);
      out_len += klen;
      out[out_len++] = '\n';
      out[out_len] = '\0';
    }
  }

  if (big_every != 0 && task % big_every == big_every - 1) { /* a big buffer, filled page by page */
    size_t bytes = (size_t)rng_range(&rng, big_mb / 2 + 1, big_mb) << 20;
    char *buf = w_malloc(w, bytes);
    for (size_t off = 0; off < bytes; off += 4096) buf[off] = (char)off;
    w_free(w, buf, false);
    w->big_buffers++;
  }

  struct batch *b = NULL;
  for (uint64_t i = 0; i < nb; i++) {
    for (struct entry *e = bucket[i], *next; e != NULL; e = next) {
      next = e->next;
      if (rng_below(&rng, 100) < 40) {
        if (b == NULL) {
          b = w_malloc(w, sizeof *b);
          b->producer = w->id;
          b->n = 0;
        }
        b->e[b->n++] = e;
        w->objects_out += entry_objects(e);
        if (b->n == BATCH) {
          queue_push(b);
          b = NULL;
        }
      } else {
        free_entry(w, e, false);
      }
    }
  }
  if (b != NULL) queue_push(b);
  w_free(w, bucket, false);
  if (out != NULL) w_free(w, out, false);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  uint64_t last_ops = 0;
  for (;;) {
    uint64_t task = atomic_fetch_add(&next_task, 1);
    if (task >= n_tasks || bench_stopping()) break;
    drain_others(w);
    run_task(w, task);
    w->tasks++;
    bench_tick(w->ops - last_ops);
    last_ops = w->ops;
  }
  drain_others(w);
  return NULL;
}

int main(int argc, char **argv) {
  bench_init("realistic", argc, argv, 2, "realistic [-t N] [tasks] [records] [big] [big_mb] [seed]");
  uint64_t tasks_per_worker = bench_arg(0, 150);
  n_records = bench_arg(1, 4000);
  uint64_t big = bench_arg(2, 3);
  big_mb = bench_arg(3, 256);
  seed = bench_arg(4, 1);
  if (tasks_per_worker == 0 || n_records == 0 || (big > 0 && big_mb < 2)) bench_die("bad arguments");

  int t = bench.threads;
  uint64_t cycle = tasks_per_worker * (uint64_t)t; /* big buffers: `big` per this many tasks */
  n_tasks = bench_limit(cycle);
  big_every = big ? (cycle / big > 0 ? cycle / big : 1) : 0;
  struct worker *w = calloc((size_t)t, sizeof *w);
  if (w == NULL) bench_die("out of memory");
  for (int i = 0; i < t; i++) w[i] = (struct worker){.id = i, .h = bench_hist_new()};

  struct worker cleaner = {.id = -1, .h = bench_hist_new()};
  bench_start();
  for (int i = 0; i < t; i++)
    if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) bench_die("pthread_create failed");
  for (int i = 0; i < t; i++) pthread_join(w[i].tid, NULL);
  drain_others(&cleaner); /* whatever the last workers left: freed by the main thread */
  bench_stop();

  uint64_t ops = cleaner.ops, frees = cleaner.frees, remote = cleaner.remote_frees, done = 0, bigs = 0, out = 0;
  for (int i = 0; i < t; i++) {
    ops += w[i].ops;
    frees += w[i].frees;
    remote += w[i].remote_frees;
    done += w[i].tasks;
    bigs += w[i].big_buffers;
    out += w[i].objects_out;
    bench_hist_merge(w[i].h);
  }
  bench_hist_merge(cleaner.h);
  bench_report(ops, "tasks=%llu records=%llu frees=%llu remote_free_pct=%.1f handed_off=%llu big_buffers=%llu",
               (unsigned long long)done, (unsigned long long)n_records, (unsigned long long)frees,
               frees ? 100.0 * (double)remote / (double)frees : 0.0, (unsigned long long)out,
               (unsigned long long)bigs);
  free(w);
  return 0;
}
