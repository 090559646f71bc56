/* region.h — what the rest of the library asks of the region front (region.c); the region API itself is
 * declared in include/hakmem.h. */
#ifndef HAK_REGION_H
#define HAK_REGION_H

/* hak_collect(true): every thread's cached free regions go back to the global pools and every dirty region
 * there is purged (areas left clean are unmapped). Does nothing in a process that never used regions. */
void hak_regions_collect(void);

#endif
