/* early_ctor_lib_preload.c — a shared object to LD_PRELOAD beside libhakmem whose constructor and
 * destructor allocate (owner: tests suite). Preloaded after libhakmem, its constructor runs before
 * libhakmem's own. The blocks it makes are exported so early_ctor_main can verify and free them. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "early_ctor.h"

struct early_block early_ctor_lib_blocks[EARLY_BLOCKS];
int early_ctor_lib_ready;

static void *thread_alloc(void *arg) {
  struct early_block *b = arg;
  early_make(b, 777, 4000);
  return NULL;
}

__attribute__((constructor(101))) static void early_lib_init(void) {
  early_make_all(early_ctor_lib_blocks, 1000);
  /* One more block made by a thread started from this constructor. */
  pthread_t t;
  if (pthread_create(&t, NULL, thread_alloc, &early_ctor_lib_blocks[EARLY_BLOCKS - 1]) == 0) pthread_join(t, NULL);
  early_ctor_lib_ready = 1;
}

__attribute__((destructor)) static void early_lib_fini(void) {
  /* Allocation during process teardown, after main returned. */
  for (int i = 1; i < 200; i++) {
    char *p = malloc((size_t)i * 37);
    if (!p) abort();
    memset(p, i, (size_t)i * 37);
    free(p);
  }
}
