/* test_threads.c — multi-threaded allocator stress with verified contents (owner: tests suite).
 *
 * Worker threads allocate objects of many sizes (16 B .. 2 MiB), stamp each with a cookie (thread, index,
 * size) and a size-based pattern, and hand them to other workers through mailboxes; the receiver verifies
 * the stamp, then frees the object, forwards it, or reallocs it (growth or shrink) and checks the old
 * contents survived. Each worker also keeps a private set of objects and one buffer it reallocs up and down.
 * Workers exit after a random number of operations and are replaced; what they kept is left on an orphan
 * list that the others free later. At the end every object must have been freed exactly once.
 * Usage: test_threads [seconds]   (default 6). Exit status 0 when every check passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hakmem.h"
#include "tcheck.h"

enum { SLOTS = 6, KEEP = 64, LIVE_LIMIT = 768 << 20 };
#define COOKIE_MAGIC 0xC0FFEE5A17ull

struct obj {
  uint64_t cookie;    /* mixes owner, index and size */
  uint32_t owner;     /* worker id (slot * 1000 + generation) that allocated it */
  uint32_t hops;      /* times forwarded */
  uint64_t index;     /* per-owner sequence number */
  size_t size;        /* total bytes of the block as requested */
  struct obj *next;   /* mailbox link */
  uint64_t body[];    /* pattern derived from the cookie */
};

struct mailbox {
  pthread_mutex_t lock;
  struct obj *head;
};

static struct mailbox boxes[SLOTS];
static struct mailbox orphans;
static atomic_int stop;
static atomic_long created, destroyed, reallocs, forwards;
static atomic_long live_bytes;
static atomic_long threads_made;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void fatal(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
static void fatal(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&fail_lock);
  fprintf(stderr, "%s:%d: FAIL: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  _exit(1);
}
#define FATAL(...) fatal(__FILE__, __LINE__, __VA_ARGS__)

static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static uint64_t make_cookie(uint32_t owner, uint64_t index, size_t size) {
  uint64_t x = COOKIE_MAGIC ^ ((uint64_t)owner << 40) ^ (index * 0x9E3779B97F4A7C15ull) ^ (size << 7);
  return x ? x : 1;
}

static size_t body_words(size_t size) { return (size - sizeof(struct obj)) / 8; }

static uint64_t word_at(uint64_t cookie, size_t i) { return cookie ^ (i * 0xBF58476D1CE4E5B9ull); }

static void stamp(struct obj *o, uint32_t owner, uint64_t index, size_t size) {
  o->cookie = make_cookie(owner, index, size);
  o->owner = owner;
  o->hops = 0;
  o->index = index;
  o->size = size;
  o->next = NULL;
  size_t n = body_words(size);
  for (size_t i = 0; i < n; i++) o->body[i] = word_at(o->cookie, i);
}

/* Verify the header and the first `words` body words (all of them if words is SIZE_MAX). */
static void verify(const struct obj *o, const char *where, size_t words) {
  if (o->cookie != make_cookie(o->owner, o->index, o->size))
    FATAL("%s: object %p: header corrupted (cookie %#llx, owner %u, index %llu, size %zu)", where, (const void *)o,
          (unsigned long long)o->cookie, o->owner, (unsigned long long)o->index, o->size);
  size_t n = body_words(o->size);
  if (words < n) n = words;
  for (size_t i = 0; i < n; i++)
    if (o->body[i] != word_at(o->cookie, i))
      FATAL("%s: object %p of worker %u index %llu size %zu: body word %zu is %#llx, expected %#llx", where,
            (const void *)o, o->owner, (unsigned long long)o->index, o->size, i, (unsigned long long)o->body[i],
            (unsigned long long)word_at(o->cookie, i));
}

static size_t pick_size(uint64_t *rng) {
  uint64_t r = rng_next(rng);
  unsigned pct = (unsigned)(r % 100);
  size_t min = sizeof(struct obj);
  r >>= 8;
  if (pct < 70) return min + r % 256;
  if (pct < 90) return 257 + r % 8000;
  if (pct < 98) return 8192 + r % (256 << 10);
  return (256 << 10) + r % (2 << 20);
}

static void push(struct mailbox *b, struct obj *o) {
  pthread_mutex_lock(&b->lock);
  o->next = b->head;
  b->head = o;
  pthread_mutex_unlock(&b->lock);
}

static struct obj *take_all(struct mailbox *b) {
  pthread_mutex_lock(&b->lock);
  struct obj *l = b->head;
  b->head = NULL;
  pthread_mutex_unlock(&b->lock);
  return l;
}

static void release(struct obj *o) {
  atomic_fetch_sub(&live_bytes, (long)o->size);
  atomic_fetch_add(&destroyed, 1);
  memset(o, 0xDD, sizeof *o);
  free(o);
}

/* Resize o to a new random size; the common prefix must survive, then it is stamped anew. */
static struct obj *resize(struct obj *o, uint64_t *rng, uint32_t me, uint64_t *next_index) {
  size_t old = o->size, n = pick_size(rng);
  struct obj *q = realloc(o, n);
  if (!q) FATAL("realloc(%zu -> %zu) returned NULL: %s", old, n, strerror(errno));
  size_t keep = body_words(old < n ? old : n);
  verify(q, "after realloc", keep);
  atomic_fetch_add(&live_bytes, (long)n - (long)old);
  atomic_fetch_add(&reallocs, 1);
  stamp(q, me, (*next_index)++, n);
  return q;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct worker_arg {
  int slot;
  uint32_t gen;
};

static void *worker(void *argp) {
  struct worker_arg arg = *(struct worker_arg *)argp;
  free(argp);
  uint32_t me = (uint32_t)arg.slot * 1000 + arg.gen;
  uint64_t rng = 0x1234567ull * (me + 1) + 99, next_index = 0;
  struct obj *kept[KEEP] = {0};
  unsigned char *grow = NULL;
  size_t grow_size = 0;
  /* Live for 2000 .. 32000 operations or 0.2 .. 1.5 s, whichever ends first. */
  long lifetime = 2000 + (long)(rng_next(&rng) % 30000);
  double deadline = now() + 0.2 + (double)(rng_next(&rng) % 1300) / 1000;

  for (long op = 0; op < lifetime && !atomic_load(&stop); op++) {
    if (op % 64 == 0 && now() > deadline) break;
    unsigned r = (unsigned)(rng_next(&rng) % 100);
    if (r < 45) { /* allocate and send */
      if (atomic_load(&live_bytes) > LIVE_LIMIT) continue;
      size_t n = pick_size(&rng);
      struct obj *o = malloc(n);
      if (!o) FATAL("malloc(%zu) returned NULL: %s", n, strerror(errno));
      if (((uintptr_t)o & 15) != 0) FATAL("malloc(%zu) = %p is not 16-byte aligned", n, (void *)o);
      atomic_fetch_add(&live_bytes, (long)n);
      atomic_fetch_add(&created, 1);
      stamp(o, me, next_index++, n);
      push(&boxes[rng_next(&rng) % SLOTS], o);
    } else if (r < 80) { /* receive */
      struct obj *l = take_all(&boxes[arg.slot]);
      while (l) {
        struct obj *o = l;
        l = l->next;
        verify(o, "received", SIZE_MAX);
        unsigned what = (unsigned)(rng_next(&rng) % 10);
        if (what < 6 || o->hops > 5) {
          release(o);
        } else if (what < 8) {
          o = resize(o, &rng, me, &next_index);
          push(&boxes[rng_next(&rng) % SLOTS], o);
        } else {
          o->hops++;
          atomic_fetch_add(&forwards, 1);
          push(&boxes[rng_next(&rng) % SLOTS], o);
        }
      }
    } else if (r < 90) { /* replace a kept object */
      int k = (int)(rng_next(&rng) % KEEP);
      if (kept[k]) {
        verify(kept[k], "kept", SIZE_MAX);
        release(kept[k]);
      }
      size_t n = pick_size(&rng);
      kept[k] = malloc(n);
      if (!kept[k]) FATAL("malloc(%zu) returned NULL", n);
      atomic_fetch_add(&live_bytes, (long)n);
      atomic_fetch_add(&created, 1);
      stamp(kept[k], me, next_index++, n);
    } else if (r < 95) { /* free some orphans of exited workers */
      struct obj *l = take_all(&orphans);
      while (l) {
        struct obj *o = l;
        l = l->next;
        verify(o, "orphan", SIZE_MAX);
        release(o);
      }
    } else if (r < 97) { /* grow or shrink the private buffer: the pattern depends on the offset only */
      size_t n = 1 + (size_t)(rng_next(&rng) % (2 << 20));
      unsigned char *g = realloc(grow, n);
      if (!g) FATAL("realloc(%zu -> %zu) returned NULL", grow_size, n);
      size_t keep = grow_size < n ? grow_size : n, bad = tc_verify(g, keep, me);
      if (bad != (size_t)-1)
        FATAL("worker %u: realloc %zu -> %zu lost contents at offset %zu", me, grow_size, n, bad);
      for (size_t i = grow_size; i < n; i++) g[i] = tc_pat(me, i);
      grow = g;
      grow_size = n;
    }
  }
  /* Exit leaving the kept objects alive for the others to free. */
  for (int k = 0; k < KEEP; k++)
    if (kept[k]) push(&orphans, kept[k]);
  free(grow);
  return NULL;
}

static void spawn(pthread_t *t, int slot, uint32_t gen) {
  struct worker_arg *a = malloc(sizeof *a);
  if (!a) FATAL("malloc of a worker argument failed");
  a->slot = slot;
  a->gen = gen;
  int rc = pthread_create(t, NULL, worker, a);
  if (rc) FATAL("pthread_create: %s", strerror(rc));
  atomic_fetch_add(&threads_made, 1);
}


static long drain(struct mailbox *b) {
  long n = 0;
  struct obj *l = take_all(b);
  while (l) {
    struct obj *o = l;
    l = l->next;
    verify(o, "final drain", SIZE_MAX);
    release(o);
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  double seconds = argc > 1 ? atof(argv[1]) : 6.0;
  int hakmem = tc_hakmem_active();
  int (*stats_get)(struct hak_stats *) = hakmem ? (int (*)(struct hak_stats *))dlsym(RTLD_DEFAULT, "hak_stats_get") : NULL;
  void (*collect)(bool) = hakmem ? (void (*)(bool))dlsym(RTLD_DEFAULT, "hak_collect") : NULL;
  struct hak_stats before = {0}, after = {0};
  printf("allocator: %s\n", hakmem ? "hakmem" : "glibc");
  if (stats_get) REQUIRE(stats_get(&before) == 0, "hak_stats_get failed");

  tc_section("workers exchanging stamped objects through mailboxes; workers exit and are replaced");
  for (int i = 0; i < SLOTS; i++) pthread_mutex_init(&boxes[i].lock, NULL);
  pthread_mutex_init(&orphans.lock, NULL);
  pthread_t threads[SLOTS];
  uint32_t gens[SLOTS] = {0};
  for (int i = 0; i < SLOTS; i++) spawn(&threads[i], i, gens[i]);

  double end = now() + seconds, next_collect = now() + 0.5;
  long replaced = 0;
  while (now() < end) {
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    for (int i = 0; i < SLOTS; i++) {
      if (pthread_tryjoin_np(threads[i], NULL) == 0) {
        spawn(&threads[i], i, ++gens[i]);
        replaced++;
      }
    }
    if (collect && now() > next_collect) {
      collect(true);
      next_collect = now() + 0.5;
    }
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < SLOTS; i++) pthread_join(threads[i], NULL);

  long left = drain(&orphans);
  for (int i = 0; i < SLOTS; i++) left += drain(&boxes[i]);
  printf("objects created %ld, freed %ld (%ld at the end), reallocs %ld, forwards %ld, threads %ld (%ld replaced)\n",
         atomic_load(&created), atomic_load(&destroyed), left, atomic_load(&reallocs), atomic_load(&forwards),
         atomic_load(&threads_made), replaced);
  CHECK_EQ(atomic_load(&destroyed), atomic_load(&created), "objects freed == objects created");
  CHECK_EQ(atomic_load(&live_bytes), 0, "live bytes after the final drain");
  CHECK(replaced >= SLOTS, "only %ld workers exited and were replaced; the test needs at least %d", replaced, SLOTS);
  CHECK(atomic_load(&reallocs) > 1000, "only %ld reallocs of received objects", atomic_load(&reallocs));

  if (stats_get) {
    tc_section("hakmem counters saw the cross-thread frees and the exited threads");
    REQUIRE(stats_get(&after) == 0, "hak_stats_get failed");
    printf("remote_frees %llu, threads_started %llu, threads_exited %llu, segments_reclaimed %llu\n",
           (unsigned long long)(after.remote_frees - before.remote_frees),
           (unsigned long long)(after.threads_started - before.threads_started),
           (unsigned long long)(after.threads_exited - before.threads_exited),
           (unsigned long long)after.segments_reclaimed);
    CHECK(after.remote_frees - before.remote_frees >= 1000, "remote_frees grew by %llu only",
          (unsigned long long)(after.remote_frees - before.remote_frees));
    CHECK(after.frees - before.frees >= (uint64_t)atomic_load(&destroyed), "frees grew by %llu, %ld objects freed",
          (unsigned long long)(after.frees - before.frees), atomic_load(&destroyed));
    /* The workers started just before the stop may never allocate: up to SLOTS of them. */
    CHECK(after.threads_started - before.threads_started >= (uint64_t)(atomic_load(&threads_made) - SLOTS),
          "threads_started grew by %llu, %ld threads allocated",
          (unsigned long long)(after.threads_started - before.threads_started), atomic_load(&threads_made));
    CHECK(after.threads_exited - before.threads_exited >= (uint64_t)(atomic_load(&threads_made) - SLOTS),
          "threads_exited grew by %llu, %ld threads exited",
          (unsigned long long)(after.threads_exited - before.threads_exited), atomic_load(&threads_made));
  }
  return tc_finish("test_threads");
}
