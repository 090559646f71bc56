//! region.rs — `hakmem::region`: big power-of-two buffers (2 MiB .. 64 GiB) from hakmem's region allocator
//! (hak_region_* in hakmem.h): thread-cached, stolen between threads, released to the OS in the
//! background, and prefetchable with MADV_WILLNEED when they have been swapped out.
//!
//! ```
//! use hakmem::region;
//!
//! let (ptr, capacity, handle) = region::allocate::<u32>(1000).unwrap();
//! assert!(capacity >= 1000);
//! // SAFETY: the region holds `capacity` u32 values and lives as long as `handle`.
//! let buf = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), capacity) };
//! buf[999] = 7;
//! handle.prefetch(0..4096).unwrap();
//! drop(handle);
//! ```
use core::fmt;
use core::mem::{align_of, size_of};
use core::ops::Range;
use core::ptr::NonNull;
use std::time::Duration;

use crate::ffi;

/// Smallest region class: 2 MiB.
pub const MIN_REGION: usize = 2 << 20;
/// Largest region class: 64 GiB.
pub const MAX_REGION: usize = 64 << 30;
/// Number of region classes (2 MiB, 4 MiB, ... 64 GiB).
pub const CLASSES: usize = 16;

const EINVAL: i32 = 22;
const ENOMEM: i32 = 12;
const EOVERFLOW: i32 = 75;
const ENOTSUP: i32 = 95;

/// Why a region operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// Zero bytes, a zero-sized or over-aligned element type, a range outside the region, or a
    /// configuration value out of range (EINVAL).
    InvalidArgument,
    /// More than [`MAX_REGION`] bytes were requested (EOVERFLOW).
    TooLarge,
    /// The operating system refused the memory (ENOMEM).
    OutOfMemory,
    /// Regions are disabled by [`configure`] (ENOTSUP).
    Disabled,
    /// Any other errno value reported by libhakmem.
    Os(i32),
}

impl AllocError {
    fn from_errno(code: i32) -> Self {
        match code {
            EINVAL => Self::InvalidArgument,
            EOVERFLOW => Self::TooLarge,
            ENOMEM => Self::OutOfMemory,
            ENOTSUP => Self::Disabled,
            other => Self::Os(other),
        }
    }
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArgument => f.write_str("invalid argument"),
            Self::TooLarge => write!(f, "region larger than {MAX_REGION} bytes"),
            Self::OutOfMemory => f.write_str("out of memory"),
            Self::Disabled => f.write_str("regions are disabled"),
            Self::Os(code) => write!(f, "hakmem error {code}"),
        }
    }
}

impl std::error::Error for AllocError {}

fn check(code: i32) -> Result<(), AllocError> {
    if code == 0 {
        Ok(())
    } else {
        Err(AllocError::from_errno(code))
    }
}

/// Ownership of one region: freeing happens when the handle is dropped.
///
/// The handle can be sent to and shared with other threads, but not cloned, so a region is freed exactly
/// once. Pointers into the region must not be used after the handle is dropped.
///
/// ```compile_fail,E0599
/// let (_, _, handle) = hakmem::region::allocate::<u8>(1).unwrap();
/// let twice = handle.clone(); // a Handle cannot be cloned
/// ```
pub struct Handle {
    raw: ffi::HakRegion,
}

// SAFETY: a handle only names a region; hak_region_* are thread-safe and the handle is freed once (Drop).
unsafe impl Send for Handle {}
// SAFETY: the only shared operations (prefetch, accessors) are thread-safe reads.
unsafe impl Sync for Handle {}

impl Handle {
    /// Start of the region (2 MiB aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.raw.ptr as *mut u8
    }

    /// Usable bytes: the region's class size.
    pub fn capacity_bytes(&self) -> usize {
        self.raw.capacity
    }

    /// Index of the region's class: `capacity_bytes() == MIN_REGION << size_class()`.
    pub fn size_class(&self) -> u32 {
        self.raw.size_class
    }

    /// Ask the OS to read the byte range `range` of the region in ahead of use (MADV_WILLNEED on the pages
    /// covering it). An empty range inside the region does nothing; a range reaching outside the region
    /// is [`AllocError::InvalidArgument`]; a hint the kernel refused is an error carrying its errno (such
    /// as `AllocError::Os(EAGAIN)`; the region is unchanged, only the hint is lost).
    pub fn prefetch(&self, range: Range<usize>) -> Result<(), AllocError> {
        if range.start > range.end {
            return Err(AllocError::InvalidArgument);
        }
        // SAFETY: `raw` is the live region this handle owns.
        check(unsafe { ffi::hak_region_prefetch(&self.raw, range.start, range.end - range.start) })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle owns the region and is dropped once.
        let rc = unsafe { ffi::hak_region_free(&mut self.raw) };
        debug_assert_eq!(rc, 0, "hak_region_free rejected a live handle");
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("ptr", &self.raw.ptr)
            .field("capacity_bytes", &self.raw.capacity)
            .field("size_class", &self.raw.size_class)
            .finish()
    }
}

/// Allocate a region for at least `capacity` values of `T`.
///
/// Returns the start of the region, the number of `T` it can hold (the class size divided by
/// `size_of::<T>()`, so at least `capacity`), and the [`Handle`] that frees it when dropped. The bytes are
/// initialized but their values unspecified: zero when fresh from the OS or released to it, otherwise the
/// old contents of a recycled region. A slice over the region is therefore sound for types every bit
/// pattern is valid for (integers, floats, arrays of them); values of other types must be written (with
/// `ptr::write`) before they are read.
///
/// ```
/// let (ptr, cap, handle) = hakmem::region::allocate::<[u8; 4096]>(3).unwrap();
/// assert_eq!(cap, 512); // 2 MiB / 4 KiB
/// assert_eq!(ptr.as_ptr() as usize % (2 << 20), 0);
/// assert_eq!(handle.capacity_bytes(), 2 << 20);
/// assert!(hakmem::region::allocate::<u64>(0).is_err());
/// ```
pub fn allocate<T>(capacity: usize) -> Result<(NonNull<T>, usize, Handle), AllocError> {
    let elem = size_of::<T>();
    if elem == 0 || align_of::<T>() > MIN_REGION {
        return Err(AllocError::InvalidArgument);
    }
    let bytes = capacity.checked_mul(elem).ok_or(AllocError::TooLarge)?;
    let mut raw = ffi::HakRegion {
        ptr: core::ptr::null_mut(),
        capacity: 0,
        size_class: 0,
        generation: 0,
    };
    // SAFETY: `raw` is a valid out-parameter.
    check(unsafe { ffi::hak_region_alloc(bytes, &mut raw) })?;
    let handle = Handle { raw };
    let ptr = NonNull::new(raw.ptr as *mut T).ok_or(AllocError::OutOfMemory)?;
    Ok((ptr, raw.capacity / elem, handle))
}

/// Configuration of the region allocator (`struct hak_region_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// `false` makes [`allocate`] fail with [`AllocError::Disabled`].
    pub enabled: bool,
    /// Period of the background release thread (rounded up to whole milliseconds, at most an hour);
    /// zero stops it.
    pub release_interval: Duration,
    /// Most dirty bytes released per period (at least one region is released per period); the
    /// classes take turns at being looked at first.
    pub release_bytes_per_tick: usize,
    /// `true`: dropping a handle returns the region's pages to the OS at once (a region the kernel
    /// refuses, e.g. with locked pages, is counted in `release_errors` and stays committed until it
    /// is reused).
    pub eager_return: bool,
    /// Most bytes per class kept in each thread's cache (default 64 MiB); lowering it moves what
    /// caches hold above the new limit to the global pools. Each period the background thread moves
    /// the regions a cache has not needed since the previous period (its low-water mark) to the
    /// pools, where they are released; with the thread stopped, caches keep what they hold until
    /// their thread reuses it or exits, or until the limit is lowered.
    pub thread_cache_bytes: usize,
    /// A new area holds `max(1, regions_in_class >> growth_dampener)` regions (0..=31).
    pub growth_dampener: u32,
    /// Ask for transparent huge pages on new areas.
    pub huge_pages: bool,
}

/// The configuration in force.
///
/// ```
/// let cfg = hakmem::region::config();
/// assert!(cfg.growth_dampener <= 31);
/// ```
pub fn config() -> Config {
    let mut raw = ffi::HakRegionConfig::default();
    // SAFETY: `raw` is a valid out-parameter.
    let rc = unsafe { ffi::hak_region_get_config(&mut raw) };
    debug_assert_eq!(rc, 0);
    Config {
        enabled: raw.enabled,
        release_interval: Duration::from_millis(u64::from(raw.release_interval_ms)),
        release_bytes_per_tick: raw.release_bytes_per_tick,
        eager_return: raw.eager_return,
        thread_cache_bytes: raw.thread_cache_bytes,
        growth_dampener: raw.growth_dampener,
        huge_pages: raw.huge_pages,
    }
}

/// A release interval in whole milliseconds for the C side, rounded up: a nonzero interval shorter than
/// a millisecond must not become 0, which stops the background release.
fn interval_ms(d: Duration) -> Option<u32> {
    u32::try_from(d.as_nanos().div_ceil(1_000_000)).ok()
}

/// Replace the configuration; [`AllocError::InvalidArgument`] (and no change) for a value out of range.
///
/// ```
/// use hakmem::region;
/// let mut cfg = region::config();
/// cfg.growth_dampener = 99;
/// assert_eq!(region::configure(&cfg), Err(region::AllocError::InvalidArgument));
/// ```
pub fn configure(cfg: &Config) -> Result<(), AllocError> {
    let interval = interval_ms(cfg.release_interval).ok_or(AllocError::InvalidArgument)?;
    let raw = ffi::HakRegionConfig {
        enabled: cfg.enabled,
        release_interval_ms: interval,
        release_bytes_per_tick: cfg.release_bytes_per_tick,
        eager_return: cfg.eager_return,
        thread_cache_bytes: cfg.thread_cache_bytes,
        growth_dampener: cfg.growth_dampener,
        huge_pages: cfg.huge_pages,
    };
    // SAFETY: `raw` is a valid configuration struct.
    check(unsafe { ffi::hak_region_configure(&raw) })
}

/// Counters of one region class (`struct hak_region_class_stats`, same layout: filled by the C side).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Capacity of a region of this class.
    pub class_bytes: usize,
    /// Areas mapped now.
    pub areas: u64,
    /// Bytes of those areas.
    pub mapped_bytes: u64,
    /// Regions not in use (dirty + clean).
    pub free_regions: u64,
    /// Free regions whose pages are still committed.
    pub dirty_regions: u64,
    /// Free regions already returned to the OS.
    pub clean_regions: u64,
    /// Allocations served.
    pub allocations: u64,
    /// Allocations that missed the thread cache.
    pub slow_path: u64,
    /// Areas mapped to serve allocations.
    pub refills: u64,
    /// Regions freed.
    pub frees: u64,
    /// Bytes of freed regions purged (madvise); unmapping an area whose regions are all clean adds
    /// nothing.
    pub bytes_released: u64,
    /// Failed madvise calls (never fatal).
    pub release_errors: u64,
}

/// Counters of every class, smallest first ([`CLASSES`] entries).
///
/// ```
/// let stats = hakmem::region::stats();
/// assert_eq!(stats.len(), hakmem::region::CLASSES);
/// assert_eq!(stats[1].class_bytes, 4 << 20);
/// ```
pub fn stats() -> Vec<ClassStats> {
    let mut raw = [ClassStats::default(); CLASSES];
    // SAFETY: `raw` has room for CLASSES entries of the C struct's layout.
    let n = unsafe { ffi::hak_region_stats(raw.as_mut_ptr(), CLASSES) };
    raw[..n].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_values_map_to_variants() {
        assert_eq!(AllocError::from_errno(EINVAL), AllocError::InvalidArgument);
        assert_eq!(AllocError::from_errno(EOVERFLOW), AllocError::TooLarge);
        assert_eq!(AllocError::from_errno(ENOMEM), AllocError::OutOfMemory);
        assert_eq!(AllocError::from_errno(ENOTSUP), AllocError::Disabled);
        assert_eq!(AllocError::from_errno(5), AllocError::Os(5));
        assert_eq!(check(0), Ok(()));
    }

    #[test]
    fn capacity_is_counted_in_elements() {
        let (_, cap, h) = allocate::<u64>(300_000).unwrap();
        assert_eq!(h.capacity_bytes(), 4 << 20);
        assert_eq!(h.size_class(), 1);
        assert_eq!(cap, (4 << 20) / 8);
    }

    #[test]
    fn bad_sizes_are_errors_not_crashes() {
        assert_eq!(allocate::<()>(10).unwrap_err(), AllocError::InvalidArgument);
        assert_eq!(allocate::<u8>(0).unwrap_err(), AllocError::InvalidArgument);
        assert_eq!(
            allocate::<u64>(usize::MAX).unwrap_err(),
            AllocError::TooLarge
        );
        assert_eq!(
            allocate::<u8>(MAX_REGION + 1).unwrap_err(),
            AllocError::TooLarge
        );
        #[repr(align(4194304))]
        struct Huge(#[allow(dead_code)] u8);
        assert_eq!(
            allocate::<Huge>(1).unwrap_err(),
            AllocError::InvalidArgument
        );
    }

    #[test]
    fn prefetch_is_bounds_checked() {
        let (_, _, h) = allocate::<u8>(1).unwrap();
        let cap = h.capacity_bytes();
        assert_eq!(h.prefetch(0..cap), Ok(()));
        assert_eq!(h.prefetch(cap..cap), Ok(()));
        assert_eq!(h.prefetch(0..cap + 1), Err(AllocError::InvalidArgument));
        assert_eq!(h.prefetch(cap..cap + 1), Err(AllocError::InvalidArgument));
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 10..5;
        assert_eq!(h.prefetch(backwards), Err(AllocError::InvalidArgument));
    }

    #[test]
    fn release_interval_rounds_up_to_whole_milliseconds() {
        assert_eq!(interval_ms(Duration::ZERO), Some(0));
        assert_eq!(interval_ms(Duration::from_micros(500)), Some(1));
        assert_eq!(interval_ms(Duration::from_millis(250)), Some(250));
        assert_eq!(interval_ms(Duration::from_micros(250_001)), Some(251));
        assert_eq!(interval_ms(Duration::from_secs(u64::MAX)), None);
    }
}
