//! lib.rs — root of the `hakmem` crate: Rust bindings to libhakmem, a general-purpose allocator for
//! Linux x86-64, compiled into the crate from the C sources (the C `malloc` of the program is left alone).
//!
//! * [`HakMem`] is a [`GlobalAlloc`](core::alloc::GlobalAlloc): `#[global_allocator] static A: HakMem = HakMem;`
//!   makes every Rust allocation of the program go to hakmem.
//! * [`region`] hands out big power-of-two buffers (2 MiB to 64 GiB) that page well: recycled through
//!   thread caches, released to the OS in the background, prefetchable when swapped out.
//! * [`allocator_stats`] reads the allocator's counters.
//!
//! The crate carries its own copy of libhakmem, linked into a program that uses any of the above. That
//! copy starts when the program is loaded: it reads the `HAKMEM_*` environment options then (with
//! `HAKMEM_STATS=1` it prints its statistics at exit) and registers its fork handlers. A program that
//! is also run with `LD_PRELOAD=libhakmem.so` holds two independent copies, each with its own options
//! and statistics: the preloaded one serves C `malloc`, the crate's one serves `HakMem` and the regions.
//!
//! ```
//! let (ptr, capacity, handle) = hakmem::region::allocate::<u64>(1 << 20).unwrap();
//! assert!(capacity >= 1 << 20);
//! unsafe { ptr.as_ptr().write(42) };
//! drop(handle); // the region goes back to hakmem; `ptr` must not be used any more
//! ```
#![deny(missing_docs)]

mod ffi;
mod global;
pub mod region;

pub use global::HakMem;

/// A snapshot of libhakmem's allocator counters (`struct hak_stats` of hakmem.h). Fields may be added in
/// later versions (`non_exhaustive`): read them, and build one with `Default` rather than a literal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AllocatorStats {
    /// Allocations per size tier: small (up to 1 KiB), medium (up to 512 KiB), large.
    pub allocs: [u64; 3],
    /// Bytes handed out per tier.
    pub alloc_bytes: [u64; 3],
    /// Blocks freed, all tiers.
    pub frees: u64,
    /// Bytes of mappings currently backed or backable by RAM.
    pub committed_bytes: u64,
    /// Bytes of address space currently mapped.
    pub mapped_bytes: u64,
    /// mmap calls made so far.
    pub mmap_calls: u64,
    /// madvise calls made so far.
    pub madvise_calls: u64,
    /// Blocks allocated and not yet freed, per tier. Exact for large blocks and for the calling thread's
    /// own small and medium blocks; another thread's latest ones, and blocks freed by a thread other than
    /// their owner, show with a delay (see `live_blocks` in hakmem.h).
    pub live_blocks: [u64; 3],
    /// Bytes of those blocks: block sizes, and for large blocks the memory their mappings hold.
    pub live_bytes: [u64; 3],
}

/// Read the allocator's counters (merged from every thread).
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// let layout = Layout::from_size_align(100, 8).unwrap();
/// let before = hakmem::allocator_stats();
/// let p = unsafe { hakmem::HakMem.alloc(layout) };
/// assert!(!p.is_null());
/// assert!(hakmem::allocator_stats().allocs[0] > before.allocs[0]);
/// unsafe { hakmem::HakMem.dealloc(p, layout) };
/// ```
pub fn allocator_stats() -> AllocatorStats {
    let mut raw = ffi::HakStats::default();
    // SAFETY: `raw` is a valid, writable hak_stats.
    let rc = unsafe { ffi::hak_stats_get_sized(&mut raw, core::mem::size_of::<ffi::HakStats>()) };
    debug_assert_eq!(rc, 0);
    AllocatorStats {
        allocs: raw.allocs,
        alloc_bytes: raw.alloc_bytes,
        frees: raw.frees,
        committed_bytes: raw.committed_bytes,
        mapped_bytes: raw.mapped_bytes,
        mmap_calls: raw.mmap_calls,
        madvise_calls: raw.madvise_calls,
        live_blocks: raw.live_blocks,
        live_bytes: raw.live_bytes,
    }
}

/// Number of usable bytes of a block from hakmem (at least the size requested); 0 for a null pointer.
///
/// # Safety
/// `ptr` must be null or a live block allocated by hakmem (for example through [`HakMem`]).
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// let layout = Layout::from_size_align(1000, 8).unwrap();
/// unsafe {
///     let p = hakmem::HakMem.alloc(layout);
///     assert!(hakmem::usable_size(p) >= 1000);
///     hakmem::HakMem.dealloc(p, layout);
/// }
/// ```
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    ffi::hak_usable_size(ptr as *const core::ffi::c_void)
}
