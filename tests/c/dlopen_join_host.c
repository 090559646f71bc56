/* dlopen_join_host.c — keeps 64 MiB of 60,000-byte blocks (so that hakmem's background purger waits to
 * start with the process's first other thread), then dlopens dlopen_lib_ctor_join.so (argv[1]), whose
 * constructor joins a thread that allocates: that thread's malloc starts the purger while the constructor
 * holds the loader's lock. A malloc that waited for that lock (hakmem pinning its object with dladdr
 * there, a review's finding) hung dlopen for good. Prints "loaded" and exits 0. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: dlopen_join_host PATH/dlopen_lib_ctor_join.so\n"), 2;
  for (int i = 0; i < 64 * 16; i++) {
    char *p = malloc(60000);
    if (p == NULL) return fprintf(stderr, "FAIL: malloc\n"), 1;
    memset(p, 1, 60000);
  }
  void *warm[200];
  for (int i = 0; i < 200; i++) warm[i] = malloc(288);
  for (int i = 0; i < 200; i++) free(warm[i]);
  void *h = dlopen(argv[1], RTLD_NOW);
  if (h == NULL) return fprintf(stderr, "FAIL: dlopen(%s): %s\n", argv[1], dlerror()), 1;
  printf("loaded\n");
  return 0;
}
