/* dlopen_lib_ctor_join.c — a library whose constructor starts a thread that allocates and joins it (a
 * thread pool started in a constructor), which runs inside dlopen, under the loader's lock. Loaded by
 * dlopen_join_host.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile lib_sink;

static void *worker(void *arg) {
  lib_sink = malloc(64);
  free(lib_sink);
  lib_sink = malloc(3000);
  free(lib_sink);
  return arg;
}

__attribute__((constructor)) static void start_and_join(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) == 0) pthread_join(t, NULL);
}
