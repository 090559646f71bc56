/* embed_lib_regions.c — a plugin that embeds hakmem as the Rust crate does (every src/*.c compiled in with
 * -DHAK_NO_OVERRIDE=1, nothing exported but plugin_work; tests/Makefile builds embed_lib_regions.so).
 * plugin_work starts the region release thread (a 20 ms period, no thread cache, so a freed region goes
 * to the pools, dirty) and allocates and frees a region and some blocks. Loaded and unloaded by
 * embed_host.c, whose process must survive the release thread's next wake-up after dlclose. */
#include <string.h>

#include "hakmem.h"

__attribute__((visibility("default"))) int plugin_work(void) {
  struct hak_region_config cfg;
  if (hak_region_get_config(&cfg) != 0) return 1;
  cfg.release_interval_ms = 20;
  cfg.thread_cache_bytes = 0;
  if (hak_region_configure(&cfg) != 0) return 2;
  struct hak_region r;
  if (hak_region_alloc((size_t)1 << 20, &r) != 0) return 3;
  memset(r.ptr, 1, 4096);
  if (hak_region_free(&r) != 0) return 4;
  char *p = hak_malloc(100);
  if (p == NULL) return 5;
  memset(p, 2, 100);
  hak_free(p);
  return 0;
}
