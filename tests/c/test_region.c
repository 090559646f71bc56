/* test_region.c — tests of the region API of hakmem.h (hak_region_*): size classes, every bad-input case,
 * statistics, thread caches and stealing, thread exit, configuration (growth dampener, huge pages, eager
 * return), background release observed through the stats, madvise errors, ENOMEM, fork. Each part uses its
 * own size class so the counters of one part do not disturb another. Run by tests/test_region.py.
 * The hak_region_* symbols are weak so the glibc build of tests/Makefile links; it exits 77 (skipped). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"

#pragma weak hak_region_alloc
#pragma weak hak_region_free
#pragma weak hak_region_prefetch
#pragma weak hak_region_get_config
#pragma weak hak_region_configure
#pragma weak hak_region_stats

#define MIB ((size_t)1 << 20)

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);    \
      fprintf(stderr, __VA_ARGS__);                                               \
      fputc('\n', stderr);                                                        \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)
#define CHECK_EQ(got, want)                                                                                  \
  CHECK((long long)(got) == (long long)(want), "expected %lld, got %lld", (long long)(want), (long long)(got))

static struct hak_region_class_stats cls_stats(uint32_t c) {
  struct hak_region_class_stats all[HAK_REGION_CLASSES];
  CHECK_EQ(hak_region_stats(all, HAK_REGION_CLASSES), HAK_REGION_CLASSES);
  return all[c];
}

static void configure(uint32_t interval_ms, size_t per_tick, bool eager, size_t tc_bytes, uint32_t damp, bool huge) {
  struct hak_region_config c = {.enabled = true,
                                .release_interval_ms = interval_ms,
                                .release_bytes_per_tick = per_tick,
                                .eager_return = eager,
                                .thread_cache_bytes = tc_bytes,
                                .growth_dampener = damp,
                                .huge_pages = huge};
  CHECK_EQ(hak_region_configure(&c), 0);
}

static void quiet(void) { configure(0, 0, false, (size_t)64 << 30, 1, true); }

static struct hak_region must_alloc(size_t bytes) {
  struct hak_region r;
  int rc = hak_region_alloc(bytes, &r);
  CHECK(rc == 0, "hak_region_alloc(%zu) = %d", bytes, rc);
  return r;
}

static void must_free(struct hak_region *r) {
  int rc = hak_region_free(r);
  CHECK(rc == 0, "hak_region_free(%p) = %d", r->ptr, rc);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static size_t resident_pages(void *p, size_t len) {
  size_t pages = len / 4096, n = 0;
  unsigned char vec[4096];
  for (size_t done = 0; done < pages; done += sizeof vec) {
    size_t chunk = pages - done < sizeof vec ? pages - done : sizeof vec;
    if (mincore((char *)p + done * 4096, chunk * 4096, vec) != 0) return 0; /* unmapped: nothing resident */
    for (size_t i = 0; i < chunk; i++) n += vec[i] & 1;
  }
  return n;
}

static void touch(void *p, size_t len, unsigned char v) {
  for (size_t i = 0; i < len; i += 4096) ((volatile unsigned char *)p)[i] = v;
}

/* ---- classes, rounding and the memory itself ----------------------------------------------------------- */

static void test_classes(void) {
  static const struct {
    size_t bytes;
    uint32_t cls;
  } cases[] = {{1, 0}, {2 * MIB, 0}, {2 * MIB + 1, 1}, {4 * MIB, 1}, {HAK_REGION_MAX - 1, 15}, {HAK_REGION_MAX, 15}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct hak_region r = must_alloc(cases[i].bytes);
    CHECK(r.size_class == cases[i].cls, "bytes %zu: class %u, want %u", cases[i].bytes, r.size_class, cases[i].cls);
    CHECK(r.capacity == HAK_REGION_MIN << cases[i].cls, "bytes %zu: capacity %zu", cases[i].bytes, r.capacity);
    CHECK(r.capacity >= cases[i].bytes, "capacity %zu below request %zu", r.capacity, cases[i].bytes);
    CHECK(((uintptr_t)r.ptr & (HAK_REGION_MIN - 1)) == 0, "region %p not 2 MiB aligned", r.ptr);
    must_free(&r);
  }
  struct hak_region a = must_alloc(2 * MIB), b = must_alloc(2 * MIB);
  CHECK(a.ptr != b.ptr, "two live regions share %p", a.ptr);
  memset(a.ptr, 0xA5, a.capacity);
  memset(b.ptr, 0x5A, b.capacity);
  for (size_t i = 0; i < a.capacity; i += 4093) {
    CHECK(((unsigned char *)a.ptr)[i] == 0xA5 && ((unsigned char *)b.ptr)[i] == 0x5A, "regions overlap at %zu", i);
  }
  must_free(&a);
  must_free(&b);
  printf("ok classes: rounding to 2 MiB..64 GiB, alignment, memory writable and disjoint\n");
}

/* ---- every bad input ---------------------------------------------------------------------------------- */

static void test_bad_input(void) {
  struct hak_region r, bad;
  memset(&r, 0x77, sizeof r);
  struct hak_region before = r;
  CHECK_EQ(hak_region_alloc(0, &r), EINVAL);
  CHECK_EQ(hak_region_alloc(2 * MIB, NULL), EINVAL);
  CHECK_EQ(hak_region_alloc(HAK_REGION_MAX + 1, &r), EOVERFLOW);
  CHECK_EQ(hak_region_alloc(SIZE_MAX, &r), EOVERFLOW);
  CHECK_EQ(hak_region_alloc(SIZE_MAX / 2 + 1, &r), EOVERFLOW);
  CHECK(memcmp(&r, &before, sizeof r) == 0, "a failed hak_region_alloc wrote *out");

  CHECK_EQ(hak_region_free(NULL), EINVAL);
  memset(&bad, 0, sizeof bad);
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  void *heap = malloc(64);
  bad = (struct hak_region){.ptr = heap, .capacity = HAK_REGION_MIN, .size_class = 0, .generation = 1};
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  free(heap);
  void *foreign = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(foreign != MAP_FAILED, "mmap failed");
  bad = (struct hak_region){.ptr = (void *)(((uintptr_t)foreign + HAK_REGION_MIN - 1) & ~(HAK_REGION_MIN - 1)),
                            .capacity = HAK_REGION_MIN};
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  CHECK_EQ(hak_region_prefetch(&bad, 0, 4096), EINVAL);
  munmap(foreign, 4 * MIB);

  r = must_alloc(3 * MIB); /* class 1: 4 MiB */
  bad = r;
  bad.ptr = (char *)r.ptr + 4096;
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  bad = r;
  bad.ptr = (char *)r.ptr + 2 * MIB;
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  bad = r;
  bad.capacity = 2 * MIB;
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  bad = r;
  bad.size_class = 0;
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  bad = r;
  bad.size_class = HAK_REGION_CLASSES;
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  bad = r;
  bad.size_class = UINT32_MAX;
  CHECK_EQ(hak_region_free(&bad), EINVAL);
  bad = r;
  bad.generation++;
  CHECK_EQ(hak_region_free(&bad), EINVAL);

  CHECK_EQ(hak_region_prefetch(NULL, 0, 1), EINVAL);
  CHECK_EQ(hak_region_prefetch(&r, 0, r.capacity), 0);
  CHECK_EQ(hak_region_prefetch(&r, r.capacity - 4096, 4096), 0);
  CHECK_EQ(hak_region_prefetch(&r, 12345, 1), 0);
  CHECK_EQ(hak_region_prefetch(&r, r.capacity, 0), 0);
  CHECK_EQ(hak_region_prefetch(&r, 0, r.capacity + 1), EINVAL);
  CHECK_EQ(hak_region_prefetch(&r, r.capacity, 1), EINVAL);
  CHECK_EQ(hak_region_prefetch(&r, r.capacity + 1, 0), EINVAL);
  CHECK_EQ(hak_region_prefetch(&r, r.capacity - 4096, 8192), EINVAL);
  CHECK_EQ(hak_region_prefetch(&r, 4096, SIZE_MAX), EINVAL);
  CHECK_EQ(hak_region_prefetch(&r, SIZE_MAX, 2), EINVAL);
  bad = r;
  bad.generation--;
  CHECK_EQ(hak_region_prefetch(&bad, 0, 4096), EINVAL);

  struct hak_region stale = r;
  must_free(&r);
  CHECK_EQ(hak_region_free(&stale), EINVAL);
  CHECK_EQ(hak_region_prefetch(&stale, 0, 4096), EINVAL);
  struct hak_region again = must_alloc(3 * MIB);
  CHECK(again.ptr == stale.ptr, "the thread cache did not hand back the freed region");
  CHECK(again.generation != stale.generation, "a reused region kept its generation");
  CHECK_EQ(hak_region_free(&stale), EINVAL);
  CHECK_EQ(hak_region_prefetch(&again, 0, 4096), 0);
  must_free(&again);
  CHECK_EQ(hak_region_free(&again), EINVAL);

  struct hak_region_config c;
  CHECK_EQ(hak_region_get_config(NULL), EINVAL);
  CHECK_EQ(hak_region_configure(NULL), EINVAL);
  CHECK_EQ(hak_region_get_config(&c), 0);
  struct hak_region_config orig = c;
  c.release_interval_ms = 3600001;
  CHECK_EQ(hak_region_configure(&c), EINVAL);
  c = orig;
  c.growth_dampener = 32;
  CHECK_EQ(hak_region_configure(&c), EINVAL);
  c = orig;
  c.release_interval_ms = 10;
  c.release_bytes_per_tick = 0;
  CHECK_EQ(hak_region_configure(&c), EINVAL);
  struct hak_region_config now;
  CHECK_EQ(hak_region_get_config(&now), 0);
  CHECK(memcmp(&now, &orig, sizeof now) == 0, "a rejected configuration changed the one in force");

  struct hak_region_class_stats buf[HAK_REGION_CLASSES + 4];
  CHECK_EQ(hak_region_stats(NULL, 4), 0);
  CHECK_EQ(hak_region_stats(buf, 0), 0);
  CHECK_EQ(hak_region_stats(buf, 3), 3);
  CHECK_EQ(hak_region_stats(buf, HAK_REGION_CLASSES + 4), HAK_REGION_CLASSES);
  for (uint32_t i = 0; i < HAK_REGION_CLASSES; i++) CHECK_EQ(buf[i].class_bytes, HAK_REGION_MIN << i);
  printf("ok bad input: 0 bytes, NULL, overflow, forged/modified/stale handles, double free, prefetch ranges, "
         "configure ranges, stats bounds\n");
}

static void test_configure(void) {
  struct hak_region_config want = {.enabled = true,
                                   .release_interval_ms = 0,
                                   .release_bytes_per_tick = 123 * MIB,
                                   .eager_return = true,
                                   .thread_cache_bytes = 7 * MIB,
                                   .growth_dampener = 5,
                                   .huge_pages = false};
  struct hak_region_config got;
  CHECK_EQ(hak_region_configure(&want), 0);
  CHECK_EQ(hak_region_get_config(&got), 0);
  CHECK(got.enabled == want.enabled && got.release_interval_ms == want.release_interval_ms &&
            got.release_bytes_per_tick == want.release_bytes_per_tick && got.eager_return == want.eager_return &&
            got.thread_cache_bytes == want.thread_cache_bytes && got.growth_dampener == want.growth_dampener &&
            got.huge_pages == want.huge_pages,
        "get_config does not return what configure set");
  quiet();
  struct hak_region live = must_alloc(2 * MIB), r;
  struct hak_region_config off;
  CHECK_EQ(hak_region_get_config(&off), 0);
  off.enabled = false;
  CHECK_EQ(hak_region_configure(&off), 0);
  CHECK_EQ(hak_region_alloc(2 * MIB, &r), ENOTSUP);
  CHECK_EQ(hak_region_alloc(0, &r), EINVAL);
  must_free(&live);
  quiet();
  printf("ok configure: round trip, disabled -> ENOTSUP while frees still work\n");
}

/* ---- statistics, thread cache, global pool --------------------------------------------------------------- */

static void test_stats(void) {
  const uint32_t c = 2;
  quiet();
  struct hak_region_class_stats s0 = cls_stats(c);
  struct hak_region a = must_alloc(8 * MIB);
  struct hak_region_class_stats s1 = cls_stats(c);
  CHECK_EQ(s1.allocations - s0.allocations, 1);
  CHECK_EQ(s1.slow_path - s0.slow_path, 1);
  CHECK_EQ(s1.refills - s0.refills, 1);
  CHECK(s1.areas >= 1 && s1.mapped_bytes >= a.capacity, "areas %llu mapped %llu", (unsigned long long)s1.areas,
        (unsigned long long)s1.mapped_bytes);
  touch(a.ptr, 4 * MIB, 1);
  must_free(&a);
  struct hak_region_class_stats s2 = cls_stats(c);
  CHECK_EQ(s2.frees - s1.frees, 1);
  CHECK_EQ(s2.dirty_regions - s1.dirty_regions, 1);
  CHECK_EQ(s2.free_regions, s2.dirty_regions + s2.clean_regions);
  struct hak_region b = must_alloc(8 * MIB);
  struct hak_region_class_stats s3 = cls_stats(c);
  CHECK(b.ptr == a.ptr, "thread cache miss: got %p, freed %p", b.ptr, a.ptr);
  CHECK_EQ(s3.slow_path, s2.slow_path);
  CHECK_EQ(s3.refills, s2.refills);
  CHECK_EQ(s3.dirty_regions, s1.dirty_regions);
  CHECK_EQ(((unsigned char *)b.ptr)[4096], 1); /* dirty reuse keeps the pages */
  must_free(&b);

  configure(0, 0, false, 0, 1, true); /* no thread cache: frees go to the global pool */
  struct hak_region d = must_alloc(8 * MIB);
  struct hak_region_class_stats s4 = cls_stats(c);
  must_free(&d);
  struct hak_region e = must_alloc(8 * MIB);
  struct hak_region_class_stats s5 = cls_stats(c);
  CHECK(e.ptr == d.ptr, "global pool did not return the dirty region");
  CHECK_EQ(s5.slow_path - s4.slow_path, 1);
  CHECK_EQ(s5.refills, s4.refills);
  must_free(&e);
  quiet();
  printf("ok stats: allocations, slow path, refills, frees, dirty counts; thread cache and global pool reuse\n");
}

struct park {
  uint32_t cls;
  int n;
  void *ptrs[8];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int phase; /* 1 = regions cached, 2 = may exit */
};

static void *parker(void *arg) {
  struct park *p = arg;
  struct hak_region r[8];
  for (int i = 0; i < p->n; i++) {
    r[i] = must_alloc(HAK_REGION_MIN << p->cls);
    p->ptrs[i] = r[i].ptr;
    touch(r[i].ptr, 4096 * 4, (unsigned char)i);
  }
  for (int i = 0; i < p->n; i++) must_free(&r[i]);
  pthread_mutex_lock(&p->mu);
  p->phase = 1;
  pthread_cond_broadcast(&p->cv);
  while (p->phase != 2) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void park_start(struct park *p, pthread_t *th, uint32_t cls, int n) {
  memset(p, 0, sizeof *p);
  p->cls = cls;
  p->n = n;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  CHECK_EQ(pthread_create(th, NULL, parker, p), 0);
  pthread_mutex_lock(&p->mu);
  while (p->phase != 1) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

static void park_finish(struct park *p, pthread_t th) {
  pthread_mutex_lock(&p->mu);
  p->phase = 2;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  CHECK_EQ(pthread_join(th, NULL), 0);
}

static bool parked(const struct park *p, void *ptr) {
  for (int i = 0; i < p->n; i++)
    if (p->ptrs[i] == ptr) return true;
  return false;
}

static void test_stealing(void) {
  const uint32_t c = 3;
  quiet();
  struct park p;
  pthread_t th;
  park_start(&p, &th, c, 4);
  struct hak_region_class_stats s0 = cls_stats(c);
  CHECK_EQ(s0.free_regions, 4);
  struct hak_region a = must_alloc(16 * MIB), b = must_alloc(16 * MIB);
  struct hak_region_class_stats s1 = cls_stats(c);
  CHECK(parked(&p, a.ptr) && parked(&p, b.ptr), "regions %p %p were not stolen from the other thread", a.ptr, b.ptr);
  CHECK_EQ(s1.refills, s0.refills);
  CHECK_EQ(s1.slow_path - s0.slow_path, 1); /* one steal took half the victim's cache */
  CHECK_EQ(s1.free_regions, 2);
  park_finish(&p, th);
  must_free(&a);
  must_free(&b);
  printf("ok stealing: a miss takes half of another thread's cache before mapping\n");
}

static void test_thread_exit(void) {
  const uint32_t c = 4;
  quiet();
  struct park p;
  pthread_t th;
  park_start(&p, &th, c, 3);
  park_finish(&p, th);
  struct hak_region_class_stats s0 = cls_stats(c);
  CHECK_EQ(s0.free_regions, 3);
  CHECK_EQ(s0.dirty_regions, 3);
  struct hak_region r[3];
  for (int i = 0; i < 3; i++) {
    r[i] = must_alloc(32 * MIB);
    CHECK(parked(&p, r[i].ptr), "region %p is not one the exited thread cached", r[i].ptr);
  }
  struct hak_region_class_stats s1 = cls_stats(c);
  CHECK_EQ(s1.refills, s0.refills);
  CHECK_EQ(s1.free_regions, 0);
  for (int i = 0; i < 3; i++) must_free(&r[i]);
  printf("ok thread exit: the cache of an exited thread goes back to the global pool\n");
}

/* ---- growth, huge pages, eager return, background release, madvise errors -------------------------------- */

static void test_growth(void) {
  const uint32_t c8 = 8, c12 = 12;
  struct hak_region r[8];
  configure(0, 0, false, 0, 0, true);
  struct hak_region_class_stats s0 = cls_stats(c8);
  for (int i = 0; i < 8; i++) r[i] = must_alloc((size_t)512 * MIB);
  struct hak_region_class_stats s1 = cls_stats(c8);
  CHECK_EQ(s1.refills - s0.refills, 4); /* areas of 1, 1, 2, 4 regions */
  CHECK_EQ(s1.mapped_bytes - s0.mapped_bytes, 8 * ((size_t)512 * MIB));
  for (int i = 0; i < 8; i++) must_free(&r[i]);
  configure(0, 0, false, 0, 31, true);
  s0 = cls_stats(c12);
  for (int i = 0; i < 6; i++) r[i] = must_alloc((size_t)8 << 30);
  s1 = cls_stats(c12);
  CHECK_EQ(s1.refills - s0.refills, 6);
  CHECK_EQ(s1.areas - s0.areas, 6);
  for (int i = 0; i < 6; i++) must_free(&r[i]);
  quiet();
  printf("ok growth dampener: 0 doubles the class per area, 31 maps one region per area\n");
}

/* VmFlags of the mapping holding p, from /proc/self/smaps. */
static bool vm_flag(void *p, const char *flag) {
  FILE *f = fopen("/proc/self/smaps", "r");
  CHECK(f != NULL, "cannot open /proc/self/smaps");
  char line[512];
  bool inside = false, found = false;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      char needle[8];
      snprintf(needle, sizeof needle, " %s", flag);
      found = strstr(line, needle) != NULL;
      break;
    }
  }
  fclose(f);
  return found;
}

static void test_huge_pages(void) {
  const uint32_t c = 10;
  configure(0, 0, false, 0, 31, true);
  struct hak_region on = must_alloc((size_t)2048 * MIB);
  configure(0, 0, false, 0, 31, false);
  struct hak_region off = must_alloc((size_t)2048 * MIB);
  CHECK(vm_flag(on.ptr, "hg"), "area with huge_pages = true lacks MADV_HUGEPAGE (VmFlags hg)");
  CHECK(vm_flag(off.ptr, "nh"), "area with huge_pages = false lacks MADV_NOHUGEPAGE (VmFlags nh)");
  CHECK(cls_stats(c).areas >= 2, "two areas expected");
  must_free(&on);
  must_free(&off);
  quiet();
  printf("ok huge pages: areas carry the huge-page hint, or the no-huge-page one when disabled\n");
}

static void test_eager(void) {
  const uint32_t c = 7;
  configure(0, 0, true, 64 * MIB, 31, true);
  struct hak_region_class_stats s0 = cls_stats(c);
  struct hak_region r = must_alloc(256 * MIB);
  touch(r.ptr, 8 * MIB, 3);
  CHECK(resident_pages(r.ptr, 8 * MIB) == 2048, "touched pages not resident");
  must_free(&r);
  struct hak_region_class_stats s1 = cls_stats(c);
  CHECK_EQ(s1.bytes_released - s0.bytes_released, 256 * MIB);
  CHECK_EQ(s1.dirty_regions, 0);
  CHECK_EQ(s1.areas, s0.areas); /* the one-region area went back to the OS */
  CHECK_EQ(s1.mapped_bytes, s0.mapped_bytes);
  CHECK_EQ(resident_pages(r.ptr, 8 * MIB), 0);
  quiet();
  printf("ok eager return: free releases the pages and the empty area at once\n");
}

static bool wait_for(uint32_t c, uint64_t dirty, uint64_t areas, int ms) {
  for (int t = 0; t < ms; t += 10) {
    struct hak_region_class_stats s = cls_stats(c);
    if (s.dirty_regions == dirty && s.areas == areas) return true;
    sleep_ms(10);
  }
  return false;
}

static void test_background(void) {
  const uint32_t c = 5;
  struct hak_region r[4];
  configure(0, 0, false, 0, 0, true);
  struct hak_region_class_stats s0 = cls_stats(c);
  for (int i = 0; i < 4; i++) {
    r[i] = must_alloc(64 * MIB);
    touch(r[i].ptr, 4 * MIB, (unsigned char)(i + 1));
  }
  struct hak_region_class_stats s1 = cls_stats(c);
  CHECK(s1.areas > s0.areas, "no area mapped");
  for (int i = 0; i < 4; i++) must_free(&r[i]);
  CHECK_EQ(cls_stats(c).dirty_regions, 4);
  sleep_ms(50);
  CHECK_EQ(cls_stats(c).dirty_regions, 4); /* no background thread while the interval is 0 */
  configure(10, 4096, false, 0, 0, true);  /* budget below one region: still one region per tick */
  CHECK(wait_for(c, 0, s0.areas, 5000), "background thread did not release: dirty %llu areas %llu",
        (unsigned long long)cls_stats(c).dirty_regions, (unsigned long long)cls_stats(c).areas);
  struct hak_region_class_stats s2 = cls_stats(c);
  CHECK_EQ(s2.bytes_released - s0.bytes_released, 4 * 64 * MIB);
  CHECK_EQ(s2.mapped_bytes, s0.mapped_bytes);
  for (int i = 0; i < 4; i++) CHECK_EQ(resident_pages(r[i].ptr, 4 * MIB), 0);
  quiet();
  printf("ok background release: dirty regions purged, whole areas unmapped, seen in the stats\n");
}

static void test_release_errors(void) {
  const uint32_t c = 6;
  uint64_t areas0 = cls_stats(c).areas;
  configure(0, 0, false, 0, 31, true);
  struct hak_region r = must_alloc(128 * MIB);
  touch(r.ptr, 4096, 9);
  if (mlock(r.ptr, 4096) != 0) {
    printf("skip release errors: mlock failed (%s)\n", strerror(errno));
    must_free(&r);
    return;
  }
  void *locked = r.ptr;
  must_free(&r);
  struct hak_region_class_stats s0 = cls_stats(c);
  configure(10, 1 << 30, false, 0, 31, true);
  for (int t = 0; t < 5000 && cls_stats(c).release_errors == s0.release_errors; t += 10) sleep_ms(10);
  struct hak_region_class_stats s1 = cls_stats(c);
  CHECK(s1.release_errors > s0.release_errors, "madvise on locked pages should have failed and been counted");
  configure(0, 0, false, 0, 31, true);
  /* The background thread may still hold the region for a last attempt: take regions until it comes back. */
  struct hak_region got[4];
  int n = 0;
  bool back = false;
  while (n < 4 && !back) {
    got[n] = must_alloc(128 * MIB);
    back = got[n++].ptr == locked;
  }
  CHECK(back, "the region whose release failed was lost");
  munlock(locked, 4096);
  while (n > 0) must_free(&got[--n]);
  configure(10, 1 << 30, false, 0, 31, true);
  CHECK(wait_for(c, 0, areas0, 5000), "regions not released after munlock");
  quiet();
  printf("ok release errors: a failing madvise is counted, the region stays usable, nothing crashes\n");
}

/* ---- many threads, ENOMEM, fork -------------------------------------------------------------------------- */

#define XTHREADS 4
#define XROUNDS 150
static struct hak_region handoff[XTHREADS];
static _Atomic int handoff_full[XTHREADS];

static void *stress(void *arg) {
  int id = (int)(intptr_t)arg;
  unsigned seed = (unsigned)id * 7919u + 1;
  for (int i = 0; i < XROUNDS; i++) {
    size_t bytes = (size_t)(rand_r(&seed) % (6 * MIB)) + 1;
    struct hak_region r = must_alloc(bytes);
    uint64_t stamp = (uint64_t)id << 32 | (uint64_t)i;
    for (size_t off = 0; off < r.capacity; off += 256 * 1024) memcpy((char *)r.ptr + off, &stamp, sizeof stamp);
    for (size_t off = 0; off < r.capacity; off += 256 * 1024)
      CHECK(memcmp((char *)r.ptr + off, &stamp, sizeof stamp) == 0, "region %p shared by two threads", r.ptr);
    int peer = (id + 1) % XTHREADS;
    if (!atomic_load(&handoff_full[peer])) {
      handoff[peer] = r;
      atomic_store(&handoff_full[peer], 1);
    } else {
      must_free(&r);
    }
    if (atomic_load(&handoff_full[id])) {
      struct hak_region mine = handoff[id];
      atomic_store(&handoff_full[id], 0);
      must_free(&mine);
    }
  }
  return NULL;
}

static void test_threads(void) {
  configure(5, 64 * MIB, false, 8 * MIB, 1, true);
  uint64_t a0 = 0, f0 = 0, a1 = 0, f1 = 0;
  for (uint32_t c = 0; c < 3; c++) {
    a0 += cls_stats(c).allocations;
    f0 += cls_stats(c).frees;
  }
  pthread_t th[XTHREADS];
  for (int i = 0; i < XTHREADS; i++) CHECK_EQ(pthread_create(&th[i], NULL, stress, (void *)(intptr_t)i), 0);
  for (int i = 0; i < XTHREADS; i++) CHECK_EQ(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < XTHREADS; i++) {
    if (handoff_full[i]) must_free(&handoff[i]);
  }
  for (uint32_t c = 0; c < 3; c++) {
    a1 += cls_stats(c).allocations;
    f1 += cls_stats(c).frees;
  }
  CHECK_EQ(a1 - a0, XTHREADS * XROUNDS);
  CHECK_EQ(f1 - f0, XTHREADS * XROUNDS);
  quiet();
  printf("ok threads: %d threads, cross-thread frees, background thread running, counters balance\n", XTHREADS);
}

static void test_enomem(void) {
  pid_t pid = fork();
  CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    struct rlimit lim = {(rlim_t)1 << 30, (rlim_t)1 << 30};
    struct hak_region r;
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
    if (hak_region_alloc((size_t)16 << 30, &r) != ENOMEM) _exit(4); /* class 13, never used before */
    _exit(0);
  }
  int status = 0;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "ENOMEM child: status %d", status);

  /* Under an address-space limit, live 64 MiB regions until ENOMEM: by then not even one more fits (a
   * class's growth step asked for several regions at once and failed while one still fitted). */
  pid = fork();
  CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    FILE *f = fopen("/proc/self/statm", "r");
    size_t pages = 0;
    if (f == NULL || fscanf(f, "%zu", &pages) != 1) _exit(5);
    fclose(f);
    rlim_t limit = (rlim_t)pages * 4096 + ((rlim_t)1 << 30);
    struct rlimit lim = {limit, limit};
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
    static struct hak_region live[64];
    const size_t bytes = (size_t)64 * MIB;
    int n = 0, rc = 0;
    while (n < 64 && (rc = hak_region_alloc(bytes, &live[n])) == 0) n++;
    if (rc != ENOMEM) _exit(6);
    void *room = mmap(NULL, bytes + 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (room != MAP_FAILED) {
      printf("ENOMEM after %d regions of 64 MiB while 66 MiB could still be mapped\n", n);
      _exit(7);
    }
    _exit(0);
  }
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "address-space limit child: status %d", status);
  printf("ok ENOMEM: an allocation the OS refuses returns ENOMEM, only once no region fits\n");
}

static void test_fork(void) {
  const uint32_t c = 11;
  configure(1000, 1 << 30, false, (size_t)64 << 30, 1, true); /* the background thread runs in the parent */
  struct hak_region live = must_alloc((size_t)4096 * MIB);
  struct park p;
  pthread_t th;
  park_start(&p, &th, c, 2); /* another thread holds two regions in its cache across the fork */
  struct hak_region_class_stats s0 = cls_stats(c);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    CHECK_EQ(cls_stats(c).free_regions, 2);
    struct hak_region a = must_alloc((size_t)4096 * MIB), b = must_alloc((size_t)4096 * MIB);
    CHECK(parked(&p, a.ptr) && parked(&p, b.ptr), "child did not reuse the orphaned cache");
    CHECK_EQ(cls_stats(c).refills, s0.refills);
    touch(a.ptr, MIB, 1);
    configure(10, (size_t)16 << 30, false, 0, 31, true);
    must_free(&a);
    must_free(&b);
    must_free(&live);
    CHECK(wait_for(c, 0, s0.areas - 3, 5000), "background thread did not restart in the child");
    _exit(0);
  }
  int status = 0;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child failed: status %d", status);
  quiet();
  park_finish(&p, th);
  CHECK_EQ(cls_stats(c).free_regions, 2);
  must_free(&live);
  printf("ok fork: the child reuses orphaned caches and restarts the background thread\n");
}

/* ---- generations name one allocation ----------------------------------------------------------------- */

#define REUSES 65600 /* more than the 65,536 generations an area once had to itself */
static uint32_t reuse_gen[REUSES + 1];

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* A handle's generation is what makes a stale copy fail: no two allocations may share one, even when a
 * slot is reused tens of thousands of times and another area is created after (an area mapped later at
 * the same address would otherwise accept a stale handle for a live region). Classes 9 (1 GiB) and 14
 * (32 GiB) are used by no other part, so both areas are created here, one after the other. */
static void test_generations(void) {
  struct hak_region r = must_alloc((size_t)1 << 30);
  CHECK(r.size_class == 9, "1 GiB: class %u", r.size_class);
  reuse_gen[0] = r.generation;
  for (int i = 1; i <= REUSES; i++) {
    void *ptr = r.ptr;
    must_free(&r);
    r = must_alloc((size_t)1 << 30);
    CHECK(r.ptr == ptr, "reuse %d: the thread cache did not hand back the freed region", i);
    reuse_gen[i] = r.generation;
  }
  struct hak_region other = must_alloc((size_t)32 << 30);
  CHECK(other.size_class == 14, "32 GiB: class %u", other.size_class);
  for (int i = 0; i <= REUSES; i++)
    CHECK(reuse_gen[i] != other.generation, "a new area's region got generation %u, which reuse %d of another had",
          other.generation, i);
  qsort(reuse_gen, REUSES + 1, sizeof reuse_gen[0], cmp_u32);
  for (int i = 1; i <= REUSES; i++) CHECK(reuse_gen[i] != reuse_gen[i - 1], "generation %u handed out twice", reuse_gen[i]);
  must_free(&other);
  must_free(&r);
  printf("ok generations: %d reuses of one region and a new area, every generation distinct\n", REUSES);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (hak_region_alloc == NULL) {
    printf("skip: hak_region_* not available (not linked with libhakmem)\n");
    return 77;
  }
  quiet();
  test_classes();
  test_bad_input();
  test_configure();
  test_stats();
  test_stealing();
  test_thread_exit();
  test_growth();
  test_huge_pages();
  test_eager();
  test_background();
  test_release_errors();
  test_threads();
  test_enomem();
  test_fork();
  test_generations();
  printf("all region tests passed\n");
  return 0;
}
