/* embed_host.c — loads a plugin that embeds hakmem (argv[1], embed_lib_regions.so), calls plugin_work,
 * unloads it and sleeps past the region release thread's next period: the plugin's code must stay mapped
 * for that thread (the plugin crashed its host with SIGSEGV at the thread's wake-up before hakmem pinned
 * its object with RTLD_NODELETE). Prints "host survived" and exits 0 when all went well. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The Threads: line of /proc/self/status; -1 if unreadable. */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
  if (f != NULL) fclose(f);
  return n;
}

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: embed_host PATH/embed_lib_regions.so\n"), 2;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return fprintf(stderr, "FAIL: dlopen(%s): %s\n", argv[1], dlerror()), 1;
  int (*work)(void) = (int (*)(void))dlsym(h, "plugin_work");
  if (work == NULL) return fprintf(stderr, "FAIL: no plugin_work\n"), 1;
  int rc = work();
  if (rc != 0) return fprintf(stderr, "FAIL: plugin_work returned %d\n", rc), 1;
  int threads = thread_count(); /* the release thread, started by the region's free */
  if (threads != 2) return fprintf(stderr, "FAIL: %d threads after plugin_work, expected 2\n", threads), 1;
  if (dlclose(h) != 0) return fprintf(stderr, "FAIL: dlclose: %s\n", dlerror()), 1;
  printf("unloaded, %d threads\n", thread_count());
  struct timespec wait = {0, 200 * 1000000L}; /* ten release periods */
  nanosleep(&wait, NULL);
  printf("host survived\n");
  return 0;
}
