//! ffi.rs — the C declarations of include/hakmem.h used by the crate (layouts mirror the header exactly).
use core::ffi::c_void;

/// `struct hak_region`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct HakRegion {
    pub ptr: *mut c_void,
    pub capacity: usize,
    pub size_class: u32,
    pub generation: u32,
}

/// `struct hak_region_config`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct HakRegionConfig {
    pub enabled: bool,
    pub release_interval_ms: u32,
    pub release_bytes_per_tick: usize,
    pub eager_return: bool,
    pub thread_cache_bytes: usize,
    pub growth_dampener: u32,
    pub huge_pages: bool,
}

/// `struct hak_stats` (HAK_TIER_COUNT = 3).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct HakStats {
    pub allocs: [u64; 3],
    pub alloc_bytes: [u64; 3],
    pub frees: u64,
    pub remote_frees: u64,
    pub committed_bytes: u64,
    pub peak_committed_bytes: u64,
    pub mapped_bytes: u64,
    pub mmap_calls: u64,
    pub munmap_calls: u64,
    pub madvise_calls: u64,
    pub mprotect_calls: u64,
    pub mremap_calls: u64,
    pub large_cache_hits: u64,
    pub large_cache_misses: u64,
    pub threads_started: u64,
    pub threads_exited: u64,
    pub segments_reclaimed: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub peak_rss_bytes: u64,
    pub current_rss_bytes: u64,
    pub slow_allocs: u64,
    pub slow_frees: u64,
    pub live_blocks: [u64; 3],
    pub live_bytes: [u64; 3],
    pub mincore_calls: u64,
    pub orphaned_pages: u64,
}

// The mirror has the C struct's size (35 counters; stats.c asserts the same number), and
// hak_stats_get_sized is told it, so a library of another version never writes past it.
const _: () = assert!(core::mem::size_of::<HakStats>() == 35 * 8);

extern "C" {
    pub fn hak_malloc(size: usize) -> *mut c_void;
    pub fn hak_calloc(count: usize, size: usize) -> *mut c_void;
    pub fn hak_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    pub fn hak_free_sized(ptr: *mut c_void, size: usize);
    pub fn hak_free_aligned_sized(ptr: *mut c_void, alignment: usize, size: usize);
    pub fn hak_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
    pub fn hak_aligned_calloc(alignment: usize, count: usize, size: usize) -> *mut c_void;
    pub fn hak_usable_size(ptr: *const c_void) -> usize;
    pub fn hak_stats_get_sized(out: *mut HakStats, size: usize) -> i32;

    pub fn hak_region_alloc(bytes: usize, out: *mut HakRegion) -> i32;
    pub fn hak_region_free(region: *mut HakRegion) -> i32;
    pub fn hak_region_prefetch(region: *const HakRegion, offset: usize, len: usize) -> i32;
    pub fn hak_region_get_config(out: *mut HakRegionConfig) -> i32;
    pub fn hak_region_configure(cfg: *const HakRegionConfig) -> i32;
    pub fn hak_region_stats(out: *mut crate::region::ClassStats, max: usize) -> usize;
}
