/* early_ctor.h — blocks made by constructors and checked later, shared by early_ctor_main.c and
 * early_ctor_lib_preload.c (owner: tests suite). Each block records its size and a seed that fills it. */
#ifndef EARLY_CTOR_H
#define EARLY_CTOR_H

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { EARLY_BLOCKS = 12 };

struct early_block {
  unsigned char *ptr;
  size_t size;
  unsigned seed;
};

static inline unsigned char early_byte(unsigned seed, size_t i) { return (unsigned char)(seed * 131u + i * 7u); }

static inline void early_make(struct early_block *b, unsigned seed, size_t size) {
  b->ptr = malloc(size);
  b->size = size;
  b->seed = seed;
  if (b->ptr)
    for (size_t i = 0; i < size; i++) b->ptr[i] = early_byte(seed, i);
}

/* Make EARLY_BLOCKS - 1 blocks with every allocation function (the last slot is left to the caller). */
static inline void early_make_all(struct early_block *blocks, unsigned seed) {
  static const size_t sizes[] = {1, 24, 200, 1000, 5000, 100000, 700000, 3 << 20};
  int i = 0;
  for (; i < 8; i++) early_make(&blocks[i], seed + (unsigned)i, sizes[i]);
  /* calloc, realloc and posix_memalign, filled the same way. */
  blocks[i].ptr = calloc(100, 10), blocks[i].size = 1000, blocks[i].seed = seed + (unsigned)i;
  if (blocks[i].ptr)
    for (size_t k = 0; k < 1000; k++) blocks[i].ptr[k] = early_byte(seed + (unsigned)i, k);
  i++;
  early_make(&blocks[i], seed + (unsigned)i, 50);
  unsigned char *grown = realloc(blocks[i].ptr, 90000);
  if (grown) {
    blocks[i].ptr = grown, blocks[i].size = 90000;
    for (size_t k = 0; k < 90000; k++) grown[k] = early_byte(seed + (unsigned)i, k);
  }
  i++;
  void *aligned = NULL;
  blocks[i].size = 8192, blocks[i].seed = seed + (unsigned)i;
  if (posix_memalign(&aligned, 4096, 8192) == 0) {
    blocks[i].ptr = aligned;
    for (size_t k = 0; k < 8192; k++) blocks[i].ptr[k] = early_byte(seed + (unsigned)i, k);
  }
}

/* Offset of the first byte of b that does not hold its pattern, (size_t)-1 if all do, -2 if NULL. */
static inline size_t early_check(const struct early_block *b) {
  if (!b->ptr) return (size_t)-2;
  for (size_t i = 0; i < b->size; i++)
    if (b->ptr[i] != early_byte(b->seed, i)) return i;
  return (size_t)-1;
}

#endif
