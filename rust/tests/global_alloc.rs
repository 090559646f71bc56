//! global_alloc.rs — integration test: this whole test binary runs with `HakMem` as its global allocator,
//! across threads (collections, aligned types, zeroed and reallocated memory, cross-thread frees).
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::thread;

use hakmem::HakMem;

#[global_allocator]
static GLOBAL: HakMem = HakMem;

#[test]
fn rust_allocations_go_to_hakmem() {
    let before = hakmem::allocator_stats();
    let boxes: Vec<Box<[u8; 100]>> = (0..1000).map(|_| Box::new([7u8; 100])).collect();
    let big = vec![1u8; 4 << 20];
    let after = hakmem::allocator_stats();
    assert!(
        after.allocs[0] >= before.allocs[0] + 1000,
        "small Box allocations did not reach hakmem"
    );
    assert!(
        after.allocs[2] > before.allocs[2],
        "a 4 MiB Vec did not reach hakmem's large tier"
    );
    // Large blocks are counted exactly whatever the other test threads do, and `big` is live.
    assert!(
        after.live_blocks[2] >= 1 && after.live_bytes[2] >= 4 << 20,
        "live large blocks {} holding {} bytes while a 4 MiB Vec is live",
        after.live_blocks[2],
        after.live_bytes[2]
    );
    assert!(boxes.iter().all(|b| b.iter().all(|&x| x == 7)));
    // SAFETY: `big` is a live Vec allocated through the global allocator, i.e. hakmem.
    assert!(unsafe { hakmem::usable_size(big.as_ptr()) } >= 4 << 20);
}

#[test]
fn aligned_types_are_aligned() {
    #[repr(align(64))]
    struct Line([u8; 64]);
    #[repr(align(4096))]
    struct Page([u8; 4096]);
    for _ in 0..100 {
        let l = Box::new(Line([1; 64]));
        let p = Box::new(Page([2; 4096]));
        assert_eq!(&*l as *const Line as usize % 64, 0);
        assert_eq!(&*p as *const Page as usize % 4096, 0);
        assert_eq!(l.0[63] + p.0[4095], 3);
    }
    // A 2 MiB alignment cannot go through a stack temporary: ask the global allocator directly.
    let huge = std::alloc::Layout::from_size_align(100, 2 << 20).unwrap();
    // SAFETY: non-zero size; freed with the same layout.
    unsafe {
        let p = std::alloc::alloc(huge);
        assert!(!p.is_null() && p as usize % (2 << 20) == 0);
        p.write_bytes(9, 100);
        std::alloc::dealloc(p, huge);
    }
    let v: Vec<Line> = (0..1000).map(|i| Line([i as u8; 64])).collect();
    assert_eq!(v.as_ptr() as usize % 64, 0);
    assert!(v.iter().enumerate().all(|(i, l)| l.0[0] == i as u8));
}

#[test]
fn zeroed_and_reallocated_memory() {
    for &n in &[1usize, 17, 1000, 70_000, 600_000, 5 << 20] {
        let mut dirty = vec![0xFFu8; n];
        dirty[n - 1] = 1;
        drop(dirty);
        let z = vec![0u8; n];
        assert!(z.iter().all(|&b| b == 0), "vec![0; {n}] not zero");
    }
    let mut v: Vec<u64> = Vec::new();
    for i in 0..200_000u64 {
        v.push(i);
    }
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(v, (0..10).collect::<Vec<_>>());
    let mut s = String::new();
    for i in 0..10_000 {
        s.push_str(&i.to_string());
    }
    assert!(s.starts_with("0123456789101112"));
}

#[test]
fn threads_allocate_and_free_each_others_memory() {
    let (tx, rx) = mpsc::channel::<Vec<Box<[u64]>>>();
    let producers: Vec<_> = (0..4u64)
        .map(|t| {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut map = HashMap::new();
                for round in 0..50u64 {
                    let batch: Vec<Box<[u64]>> = (0..64u64)
                        .map(|i| {
                            vec![t << 32 | round << 16 | i; 1 + (i as usize * 37) % 3000]
                                .into_boxed_slice()
                        })
                        .collect();
                    map.insert(round, format!("{t}-{round}"));
                    tx.send(batch).unwrap();
                }
                map.len()
            })
        })
        .collect();
    drop(tx);
    let consumer = thread::spawn(move || {
        let mut seen = BTreeMap::new();
        for batch in rx {
            for b in batch {
                let stamp = b[0];
                assert!(
                    b.iter().all(|&x| x == stamp),
                    "block corrupted across threads"
                );
                *seen.entry(stamp >> 32).or_insert(0u32) += 1;
            }
        }
        seen
    });
    for p in producers {
        assert_eq!(p.join().unwrap(), 50);
    }
    let seen = consumer.join().unwrap();
    assert_eq!(seen.len(), 4);
    assert!(seen.values().all(|&n| n == 50 * 64));
}

/// Resident memory of this process, in bytes (second field of /proc/self/statm, in pages).
fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn zeroed_over_aligned_memory_is_not_written() {
    // alloc_zeroed of 256 MiB aligned to 64 (what `vec![0; n]` of such a type asks for): hakmem's fresh
    // mapping is zero already. The crate used to write zeros over all of it, committing every page (256
    // MiB resident, 0.6 s).
    let big = std::alloc::Layout::from_size_align(256 << 20, 64).unwrap();
    let before = resident_bytes();
    // SAFETY: non-zero sizes; every block is freed with its layout.
    unsafe {
        let p = std::alloc::alloc_zeroed(big);
        let grown = resident_bytes().saturating_sub(before);
        assert!(!p.is_null() && p as usize % 64 == 0);
        assert!((0..big.size()).step_by(1 << 20).all(|i| *p.add(i) == 0));
        assert!(
            grown < 64 << 20,
            "a zeroed 256 MiB block made {} MiB resident",
            grown >> 20
        );
        std::alloc::dealloc(p, big);
        // A reused block is zeroed for real.
        let layout = std::alloc::Layout::from_size_align(100_000, 256).unwrap();
        let q = std::alloc::alloc(layout);
        assert!(!q.is_null());
        std::ptr::write_bytes(q, 0xAB, layout.size());
        std::alloc::dealloc(q, layout);
        let z = std::alloc::alloc_zeroed(layout);
        assert!(!z.is_null() && z as usize % 256 == 0);
        assert!((0..layout.size()).all(|i| *z.add(i) == 0));
        std::alloc::dealloc(z, layout);
    }
}
