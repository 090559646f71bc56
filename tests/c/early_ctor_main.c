/* early_ctor_main.c — allocation before main: in this program's constructor and in the constructor of a
 * preloaded shared object (owner: tests suite). main verifies and frees every block made early, and under
 * hakmem checks they are hakmem's. Usage: early_ctor_main [--expect-lib] ; --expect-lib fails when
 * early_ctor_lib_preload.so is not preloaded. Exit status 0 when every check passed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "early_ctor.h"
#include "hakmem.h"
#include "tcheck.h"

static struct early_block main_blocks[EARLY_BLOCKS];
static char *early_env_copy;

static void *thread_alloc(void *arg) {
  early_make(arg, 555, 3000);
  return NULL;
}

__attribute__((constructor(101))) static void early_main_init(void) {
  early_make_all(main_blocks, 2000);
  pthread_t t;
  if (pthread_create(&t, NULL, thread_alloc, &main_blocks[EARLY_BLOCKS - 1]) == 0) pthread_join(t, NULL);
  const char *home = getenv("PATH");
  early_env_copy = strdup(home ? home : "");
}

static void check_blocks(const char *who, struct early_block *blocks, size_t (*usable)(const void *)) {
  for (int i = 0; i < EARLY_BLOCKS; i++) {
    size_t bad = early_check(&blocks[i]);
    CHECK(bad != (size_t)-2, "%s constructor block %d (%zu bytes) was not allocated", who, i, blocks[i].size);
    CHECK(bad == (size_t)-2 || bad == (size_t)-1, "%s constructor block %d (%zu bytes): byte %zu changed", who, i,
          blocks[i].size, bad);
    if (usable && blocks[i].ptr)
      CHECK(usable(blocks[i].ptr) >= blocks[i].size, "%s constructor block %d: hak_usable_size %zu < %zu", who, i,
            usable(blocks[i].ptr), blocks[i].size);
    free(blocks[i].ptr);
    blocks[i].ptr = NULL;
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int expect_lib = argc > 1 && strcmp(argv[1], "--expect-lib") == 0;
  int hakmem = tc_hakmem_active();
  size_t (*usable)(const void *) = hakmem ? (size_t(*)(const void *))dlsym(RTLD_DEFAULT, "hak_usable_size") : NULL;
  printf("allocator: %s\n", hakmem ? "hakmem" : "glibc");

  tc_section("blocks allocated in this program's constructor");
  check_blocks("program", main_blocks, usable);
  CHECK(early_env_copy != NULL, "strdup in the constructor returned NULL");
  free(early_env_copy);

  tc_section("blocks allocated in the preloaded library's constructor");
  struct early_block *lib_blocks = dlsym(RTLD_DEFAULT, "early_ctor_lib_blocks");
  int *lib_ready = dlsym(RTLD_DEFAULT, "early_ctor_lib_ready");
  if (lib_blocks && lib_ready) {
    CHECK(*lib_ready == 1, "the preloaded library's constructor did not finish");
    check_blocks("preloaded library", lib_blocks, usable);
  } else {
    CHECK(!expect_lib, "early_ctor_lib_preload.so is not loaded (--expect-lib given)");
    printf("   early_ctor_lib_preload.so not preloaded: skipped\n");
  }

  if (hakmem) {
    tc_section("hakmem counted the early allocations");
    int (*stats_get)(struct hak_stats *) = (int (*)(struct hak_stats *))dlsym(RTLD_DEFAULT, "hak_stats_get");
    struct hak_stats s;
    REQUIRE(stats_get && stats_get(&s) == 0, "hak_stats_get failed");
    uint64_t allocs = s.allocs[HAK_TIER_SMALL] + s.allocs[HAK_TIER_MEDIUM] + s.allocs[HAK_TIER_LARGE];
    uint64_t want = (lib_blocks ? 2 : 1) * EARLY_BLOCKS;
    CHECK(allocs >= want, "hakmem counted %llu allocations, at least %llu were made", (unsigned long long)allocs,
          (unsigned long long)want);
    CHECK(s.frees >= want, "hakmem counted %llu frees, at least %llu were made", (unsigned long long)s.frees,
          (unsigned long long)want);
  }
  return tc_finish("early_ctor_main");
}
