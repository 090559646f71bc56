//! global.rs — `HakMem`, the `GlobalAlloc` backed by hak_malloc / hak_aligned_alloc / hak_calloc /
//! hak_aligned_calloc / hak_realloc and the sized frees.
use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use core::ptr;

use crate::ffi;

/// Alignment hak_malloc guarantees for sizes of at least this many bytes (hakmem.h).
const MALLOC_ALIGN: usize = 16;

/// The hakmem allocator as a Rust global allocator.
///
/// ```
/// #[global_allocator]
/// static ALLOC: hakmem::HakMem = hakmem::HakMem;
///
/// let v: Vec<u32> = (0..1000).collect();
/// assert_eq!(v.iter().sum::<u32>(), 499_500);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct HakMem;

/// Whether plain hak_malloc already satisfies the layout's alignment.
#[inline]
fn malloc_aligned(layout: Layout) -> bool {
    layout.align() <= 8 || (layout.align() <= MALLOC_ALIGN && layout.size() >= MALLOC_ALIGN)
}

// SAFETY: every pointer comes from hakmem with at least the requested size and alignment, and is given
// back to hakmem with the layout it was allocated with.
unsafe impl GlobalAlloc for HakMem {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligned(layout) {
            ffi::hak_malloc(layout.size()) as *mut u8
        } else {
            ffi::hak_aligned_alloc(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligned(layout) {
            return ffi::hak_calloc(1, layout.size()) as *mut u8;
        }
        // hakmem zeroes what needs it: a fresh mapping is left alone (writing it committed every page)
        ffi::hak_aligned_calloc(layout.align(), 1, layout.size()) as *mut u8
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if malloc_aligned(layout) {
            ffi::hak_free_sized(ptr as *mut c_void, layout.size());
        } else {
            ffi::hak_free_aligned_sized(ptr as *mut c_void, layout.align(), layout.size());
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees new_size, rounded up to the alignment, does not overflow isize.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if malloc_aligned(new_layout) {
            return ffi::hak_realloc(ptr as *mut c_void, new_size) as *mut u8;
        }
        let fresh = self.alloc(new_layout);
        if !fresh.is_null() {
            ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_malloc_only_when_aligned_enough() {
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        assert!(malloc_aligned(l(1, 1)));
        assert!(malloc_aligned(l(8, 8)));
        assert!(malloc_aligned(l(16, 16)));
        assert!(malloc_aligned(l(4096, 16)));
        assert!(!malloc_aligned(l(8, 16)));
        assert!(!malloc_aligned(l(64, 32)));
        assert!(!malloc_aligned(l(4096, 4096)));
    }

    #[test]
    fn every_path_honours_the_layout() {
        for &(size, align) in &[
            (1, 1),
            (8, 16),
            (24, 16),
            (100, 64),
            (5000, 4096),
            (3 << 20, 1 << 21),
        ] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: non-zero sizes; every block is freed with its layout.
            unsafe {
                let p = HakMem.alloc(layout);
                assert!(
                    !p.is_null() && p as usize % align == 0,
                    "alloc({size}, {align})"
                );
                assert!(ffi::hak_usable_size(p as *const c_void) >= size);
                ptr::write_bytes(p, 0xAB, size);
                let q = HakMem.realloc(p, layout, size * 2);
                assert!(
                    !q.is_null() && q as usize % align == 0,
                    "realloc({size}, {align})"
                );
                assert!(
                    (0..size).all(|i| *q.add(i) == 0xAB),
                    "realloc lost the contents"
                );
                HakMem.dealloc(q, Layout::from_size_align(size * 2, align).unwrap());
                let z = HakMem.alloc_zeroed(layout);
                assert!(!z.is_null() && z as usize % align == 0);
                assert!(
                    (0..size).all(|i| *z.add(i) == 0),
                    "alloc_zeroed({size}, {align}) not zero"
                );
                HakMem.dealloc(z, layout);
            }
        }
    }
}
