/* dlopen_host.c — loads dlopen_lib_alloc.so (path in argv[1]) 20 times (owner: tests suite): frees the
 * blocks its constructor allocated, frees blocks it returns, hands it blocks to free, and lets its
 * destructor free the rest at dlclose. Exit status 0 when every check passed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcheck.h"

#define SYM(handle, type, name) ((type)dlsym((handle), (name)))

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  REQUIRE(argc == 2, "usage: dlopen_host PATH/dlopen_lib_alloc.so");
  printf("allocator: %s\n", tc_hakmem_active() ? "hakmem" : "glibc");
  tc_section("dlopen/dlclose a library that allocates in its constructor and functions");
  for (int round = 0; round < 20; round++) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != NULL, "dlopen(%s): %s", argv[1], dlerror());
    char **blocks = SYM(h, char **, "dlopen_lib_blocks");
    size_t *sizes = SYM(h, size_t *, "dlopen_lib_sizes");
    unsigned char (*byte)(unsigned, size_t) = SYM(h, unsigned char (*)(unsigned, size_t), "dlopen_lib_byte");
    char *(*make)(size_t, unsigned) = SYM(h, char *(*)(size_t, unsigned), "dlopen_lib_make");
    size_t (*consume)(char *, size_t, unsigned) = SYM(h, size_t (*)(char *, size_t, unsigned), "dlopen_lib_consume");
    char **(*strings)(int) = SYM(h, char **(*)(int), "dlopen_lib_strings");
    REQUIRE(blocks && sizes && byte && make && consume && strings, "a symbol is missing from %s", argv[1]);

    /* Free the even constructor blocks here; the destructor frees the odd ones. */
    for (int i = 0; i < 16; i++) {
      REQUIRE(blocks[i] != NULL, "round %d: constructor block %d is NULL", round, i);
      size_t bad = (size_t)-1;
      for (size_t k = 0; k < sizes[i] && bad == (size_t)-1; k++)
        if ((unsigned char)blocks[i][k] != byte((unsigned)i, k)) bad = k;
      CHECK(bad == (size_t)-1, "round %d: constructor block %d (%zu bytes) changed at byte %zu", round, i, sizes[i],
            bad);
      if (i % 2 == 0) {
        free(blocks[i]);
        blocks[i] = NULL;
      }
    }
    for (size_t n = 1; n < (4u << 20); n = n * 4 + 1) {
      char *p = make(n, (unsigned)n);
      REQUIRE(p != NULL, "dlopen_lib_make(%zu) returned NULL", n);
      size_t bad = (size_t)-1;
      for (size_t k = 0; k < n && bad == (size_t)-1; k++)
        if ((unsigned char)p[k] != byte((unsigned)n, k)) bad = k;
      CHECK(bad == (size_t)-1, "block from dlopen_lib_make(%zu) wrong at byte %zu", n, bad);
      p = realloc(p, n * 2);
      REQUIRE(p != NULL, "realloc of a library block returned NULL");
      free(p);

      char *q = malloc(n);
      REQUIRE(q != NULL, "malloc(%zu) returned NULL", n);
      for (size_t k = 0; k < n; k++) q[k] = (char)byte((unsigned)round, k);
      size_t res = consume(q, n, (unsigned)round);
      CHECK(res == 0, "dlopen_lib_consume saw byte %zu of a %zu-byte block wrong", res - 1, n);
    }
    char **v = strings(300);
    REQUIRE(v != NULL, "dlopen_lib_strings returned NULL");
    for (int i = 0; i < 300; i++) {
      REQUIRE(v[i] != NULL, "string %d is NULL", i);
      CHECK(strlen(v[i]) == (size_t)(i % 50) + 1 && v[i][0] == 'a' + i % 26, "string %d is \"%s\"", i, v[i]);
      free(v[i]);
    }
    CHECK(v[300] == NULL, "string array not NULL-terminated");
    free(v);
    REQUIRE(dlclose(h) == 0, "dlclose: %s", dlerror());
  }
  return tc_finish("dlopen_host");
}
