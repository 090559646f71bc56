/* dlopen_lib_alloc.c — a shared object that dlopen_host loads and unloads repeatedly (owner: tests suite).
 * Its constructor allocates blocks (one from a thread it starts), its functions return memory the host
 * frees and free memory the host allocated, and its destructor frees what the host left. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { LIB_BLOCKS = 16 };

char *dlopen_lib_blocks[LIB_BLOCKS];
size_t dlopen_lib_sizes[LIB_BLOCKS];

/* Byte i of a block of `size` bytes made with `seed`. */
unsigned char dlopen_lib_byte(unsigned seed, size_t i) { return (unsigned char)(seed ^ (i * 13u)); }

static char *make(size_t size, unsigned seed) {
  char *p = malloc(size);
  if (p)
    for (size_t i = 0; i < size; i++) p[i] = (char)dlopen_lib_byte(seed, i);
  return p;
}

static void *thread_make(void *arg) {
  (void)arg;
  dlopen_lib_blocks[LIB_BLOCKS - 1] = make(dlopen_lib_sizes[LIB_BLOCKS - 1], LIB_BLOCKS - 1);
  return NULL;
}

__attribute__((constructor)) static void lib_init(void) {
  for (int i = 0; i < LIB_BLOCKS; i++) dlopen_lib_sizes[i] = (size_t)1 << (i + 2);
  for (int i = 0; i < LIB_BLOCKS - 1; i++) dlopen_lib_blocks[i] = make(dlopen_lib_sizes[i], (unsigned)i);
  pthread_t t;
  if (pthread_create(&t, NULL, thread_make, NULL) == 0) pthread_join(t, NULL);
}

__attribute__((destructor)) static void lib_fini(void) {
  for (int i = 0; i < LIB_BLOCKS; i++) {
    free(dlopen_lib_blocks[i]);
    dlopen_lib_blocks[i] = NULL;
  }
}

/* A block of `size` bytes filled from `seed`, for the caller to free. */
char *dlopen_lib_make(size_t size, unsigned seed) { return make(size, seed); }

/* Check a block the caller allocated and filled from `seed`, then free it. Returns 0, or 1 + the offset
 * of the first wrong byte. */
size_t dlopen_lib_consume(char *p, size_t size, unsigned seed) {
  for (size_t i = 0; i < size; i++)
    if ((unsigned char)p[i] != dlopen_lib_byte(seed, i)) return i + 1;
  free(p);
  return 0;
}

/* `n` strings made with strdup/asprintf-like calls; the caller frees each and the array. */
char **dlopen_lib_strings(int n) {
  char **v = calloc((size_t)n + 1, sizeof *v);
  if (!v) return NULL;
  for (int i = 0; i < n; i++) {
    char buf[64];
    size_t len = (size_t)(i % 50) + 1;
    memset(buf, 'a' + i % 26, len);
    buf[len] = 0;
    v[i] = strdup(buf);
  }
  return v;
}
