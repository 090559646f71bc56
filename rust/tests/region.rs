//! region.rs — integration tests of `hakmem::region`: allocation, handles across threads, prefetch,
//! configure and stats. The region configuration is process-wide, so the tests take turns (CONFIG lock).
use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use hakmem::region::{self, AllocError, Config, Handle};

static CONFIG: Mutex<()> = Mutex::new(());

fn exclusive() -> MutexGuard<'static, ()> {
    CONFIG.lock().unwrap_or_else(|e| e.into_inner())
}

fn quiet() -> Config {
    Config {
        enabled: true,
        release_interval: Duration::ZERO,
        release_bytes_per_tick: 64 << 20,
        eager_return: false,
        thread_cache_bytes: 64 << 20,
        growth_dampener: 1,
        huge_pages: true,
    }
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn handle_is_send_and_sync() {
    assert_send_sync::<Handle>();
}

#[test]
fn regions_hold_data_and_are_disjoint() {
    let _g = exclusive();
    let mut handles = Vec::new();
    let mut starts = HashSet::new();
    for i in 0..8u64 {
        let (ptr, cap, h) = region::allocate::<u64>(300_000).unwrap();
        assert!(cap >= 300_000);
        assert!(
            starts.insert(ptr.as_ptr() as usize),
            "two live regions share an address"
        );
        // SAFETY: the region holds `cap` u64 values while `h` lives.
        let s = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), cap) };
        s.iter_mut().step_by(512).for_each(|x| *x = i);
        handles.push((ptr, cap, h, i));
    }
    for (ptr, cap, _, i) in &handles {
        // SAFETY: as above, the handle is still alive.
        let s = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *cap) };
        assert!(
            s.iter().step_by(512).all(|x| x == i),
            "region contents overwritten"
        );
    }
}

#[test]
fn dropping_a_handle_frees_and_recycles_the_region() {
    let _g = exclusive();
    region::configure(&quiet()).unwrap();
    let cls = 3; // 16 MiB
    let before = region::stats()[cls];
    let (p1, _, h) = region::allocate::<u8>(16 << 20).unwrap();
    drop(h);
    let mid = region::stats()[cls];
    assert_eq!(mid.frees, before.frees + 1);
    assert_eq!(mid.dirty_regions, before.dirty_regions + 1);
    let (p2, _, h2) = region::allocate::<u8>(16 << 20).unwrap();
    assert_eq!(p1, p2, "the thread cache should hand the same region back");
    assert_eq!(region::stats()[cls].slow_path, mid.slow_path);
    drop(h2);
}

#[test]
fn handles_move_between_threads() {
    let _g = exclusive();
    region::configure(&quiet()).unwrap();
    let cls = 4;
    let before = region::stats()[cls];
    let made: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                let (ptr, cap, h) = region::allocate::<u32>(5 << 20).unwrap();
                // SAFETY: the region holds `cap` u32 values while `h` lives.
                unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), cap).fill(t) };
                (ptr.as_ptr() as usize, cap, h, t)
            })
        })
        .map(|j| j.join().unwrap())
        .collect();
    let checkers: Vec<_> = made
        .into_iter()
        .map(|(addr, cap, h, t)| {
            thread::spawn(move || {
                // SAFETY: the handle moved here with the pointer and is still alive.
                let s = unsafe { std::slice::from_raw_parts(addr as *const u32, cap) };
                assert!(s.iter().all(|&x| x == t));
                h.prefetch(0..h.capacity_bytes()).unwrap();
                drop(h);
            })
        })
        .collect();
    for c in checkers {
        c.join().unwrap();
    }
    let after = region::stats()[cls];
    assert_eq!(after.allocations - before.allocations, 4);
    assert_eq!(after.frees - before.frees, 4);
}

#[test]
fn configure_round_trip_and_disable() {
    let _g = exclusive();
    let want = Config {
        enabled: true,
        release_interval: Duration::from_millis(250),
        release_bytes_per_tick: 3 << 20,
        eager_return: true,
        thread_cache_bytes: 5 << 20,
        growth_dampener: 7,
        huge_pages: false,
    };
    region::configure(&want).unwrap();
    assert_eq!(region::config(), want);
    let mut bad = want;
    bad.release_interval = Duration::from_secs(3601);
    assert_eq!(region::configure(&bad), Err(AllocError::InvalidArgument));
    bad = want;
    bad.release_interval = Duration::from_secs(u64::MAX);
    assert_eq!(region::configure(&bad), Err(AllocError::InvalidArgument));
    bad = want;
    bad.release_bytes_per_tick = 0;
    assert_eq!(region::configure(&bad), Err(AllocError::InvalidArgument));
    assert_eq!(
        region::config(),
        want,
        "a rejected configuration changed the one in force"
    );
    let mut off = quiet();
    off.enabled = false;
    region::configure(&off).unwrap();
    assert_eq!(region::allocate::<u8>(1).unwrap_err(), AllocError::Disabled);
    region::configure(&quiet()).unwrap();
    assert!(region::allocate::<u8>(1).is_ok());
}

#[test]
fn background_release_shows_in_stats() {
    let _g = exclusive();
    let cls = 5; // 64 MiB
    let mut cfg = quiet();
    cfg.thread_cache_bytes = 0;
    region::configure(&cfg).unwrap();
    let before = region::stats()[cls];
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let (ptr, cap, h) = region::allocate::<u8>(64 << 20).unwrap();
            // SAFETY: the region holds `cap` bytes while `h` lives.
            unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), cap)[..1 << 20].fill(1) };
            h
        })
        .collect();
    drop(handles);
    assert_eq!(region::stats()[cls].dirty_regions, before.dirty_regions + 3);
    cfg.release_interval = Duration::from_millis(10);
    cfg.release_bytes_per_tick = 1 << 30;
    region::configure(&cfg).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while region::stats()[cls].dirty_regions != 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let after = region::stats()[cls];
    region::configure(&quiet()).unwrap();
    assert_eq!(
        after.dirty_regions, 0,
        "background thread did not release the dirty regions"
    );
    assert!(after.bytes_released >= before.bytes_released + 3 * (64 << 20));
    assert_eq!(
        after.areas, before.areas,
        "empty areas should have been unmapped"
    );
}

#[test]
fn prefetch_rejects_ranges_outside_the_region() {
    let _g = exclusive();
    let (_, _, h) = region::allocate::<u8>(3 << 20).unwrap();
    let cap = h.capacity_bytes();
    assert_eq!(cap, 4 << 20);
    assert_eq!(h.prefetch(4096..8192), Ok(()));
    assert_eq!(
        h.prefetch(cap - 1..cap + 1),
        Err(AllocError::InvalidArgument)
    );
    assert_eq!(
        h.prefetch(usize::MAX - 1..usize::MAX),
        Err(AllocError::InvalidArgument)
    );
}
