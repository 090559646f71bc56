//! region_demo.rs — example: a 256 MiB table of u64 in a hakmem region, filled, prefetched in batches the
//! way a reader of swapped-out data would, then freed; prints the region statistics of its class.
//! Run with `cargo run --release --example region_demo`.
use hakmem::region;

fn main() -> Result<(), region::AllocError> {
    let wanted = 32 << 20; // 32 Mi u64 = 256 MiB
    let (ptr, cap, handle) = region::allocate::<u64>(wanted)?;
    println!(
        "region at {:p}: {} bytes, class {}, room for {} u64",
        ptr,
        handle.capacity_bytes(),
        handle.size_class(),
        cap
    );
    // SAFETY: the region holds `cap` u64 values for as long as `handle` lives.
    let table = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), cap) };
    for (i, x) in table.iter_mut().enumerate() {
        *x = i as u64 * 3;
    }
    let batch = 1 << 20; // elements per prefetch batch
    let mut sum = 0u64;
    for start in (0..cap).step_by(batch) {
        let end = (start + batch).min(cap);
        if end < cap {
            let next_end = (end + batch).min(cap);
            handle.prefetch(end * 8..next_end * 8)?; // ask for the next batch while summing this one
        }
        sum = table[start..end]
            .iter()
            .fold(sum, |acc, &x| acc.wrapping_add(x));
    }
    println!("sum = {sum}");
    let class = handle.size_class() as usize;
    drop(handle);
    let s = region::stats()[class];
    println!(
        "class {} MiB: areas {}, free regions {} ({} dirty), allocations {}, frees {}",
        s.class_bytes >> 20,
        s.areas,
        s.free_regions,
        s.dirty_regions,
        s.allocations,
        s.frees
    );
    Ok(())
}
