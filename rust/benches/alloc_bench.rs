//! alloc_bench.rs — `cargo bench --bench alloc_bench [-- MODE]` (harness = false). Three modes:
//!
//! * default: 1/2/4/8/16 threads allocating and freeing 2 MiB blocks with hakmem regions, hakmem malloc,
//!   the system allocator (also with MADV_NOHUGEPAGE) and raw mmap/munmap, each with and without touching
//!   every page; ops/s, p50 and p99 per operation.
//! * `--paging`: allocates 3x the cgroup memory limit (or `--limit-mib`) in 2 MiB regions, touches it all so
//!   most of it is swapped out, then measures random one-byte reads (latency CCDF) and realloc+touch
//!   (free a region, allocate one again, write its first page) from the swapped pool.
//! * `--ratio-sweep --total-mib N`: a working set of N MiB in one region, random page reads under the strategies
//!   baseline, MADV_RANDOM, MADV_SEQUENTIAL, a prefetch thread `--ahead` pages ahead, and batches of
//!   `--batch` reads prefetched through Handle::prefetch; ops/s, p50, p99, p99.9, max.
//!
//! Options: `--json PATH` (results as JSON, used by `python3 -m lab paging`), `--ops N` (most operations
//! per thread and run), `--seconds S` (time bound of a run: 3 s in the paging modes, at most 0.15 s in the
//! default mode), `--huge` (huge pages on in the paging modes). Warm-up is discarded: 20 cycles per
//! thread in the default mode, the first 5% of the samples taken in the paging modes. No result here is an assertion: timings
//! are reported, never checked.
use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use hakmem::region::{self, Handle};
use hakmem::HakMem;

const PAGE: usize = 4096;
const BLOCK: usize = 2 << 20;

struct Opts {
    mode: Mode,
    total_mib: usize,
    limit_mib: Option<usize>,
    ops: Option<usize>,
    seconds: f64,
    ahead: usize,
    batch: usize,
    huge: bool,
    json: Option<String>,
}

#[derive(PartialEq)]
enum Mode {
    Throughput,
    Paging,
    RatioSweep,
}

fn parse_args() -> Opts {
    let mut o = Opts {
        mode: Mode::Throughput,
        total_mib: 1024,
        limit_mib: None,
        ops: None,
        seconds: 3.0,
        ahead: 32,
        batch: 32,
        huge: false,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--paging" => o.mode = Mode::Paging,
            "--ratio-sweep" => o.mode = Mode::RatioSweep,
            "--total-mib" => o.total_mib = number(&value("--total-mib")),
            "--limit-mib" => o.limit_mib = Some(number(&value("--limit-mib"))),
            "--ops" => o.ops = Some(number(&value("--ops"))),
            "--seconds" => {
                o.seconds = value("--seconds")
                    .parse()
                    .unwrap_or_else(|_| usage("bad --seconds"))
            }
            "--ahead" => o.ahead = number(&value("--ahead")).max(1),
            "--batch" => o.batch = number(&value("--batch")).max(1),
            "--huge" => o.huge = true,
            "--json" => o.json = Some(value("--json")),
            "--bench" => {} // added by `cargo bench`
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    o
}

fn number(s: &str) -> usize {
    s.parse()
        .unwrap_or_else(|_| usage(&format!("not a number: {s}")))
}

fn usage(msg: &str) -> ! {
    if !msg.is_empty() {
        eprintln!("alloc_bench: {msg}");
    }
    eprintln!(
        "usage: alloc_bench [--paging [--limit-mib N] | --ratio-sweep --total-mib N [--ahead N] [--batch N]]\n\
         \x20                  [--ops N] [--seconds S] [--huge] [--json PATH]"
    );
    std::process::exit(2);
}

// ---- measurements -------------------------------------------------------------------------------------

struct Summary {
    ops: usize,
    ops_per_s: f64,
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

/// Sort the kept samples. `elapsed` covers them only.
fn summarize(mut lat: Vec<u64>, elapsed: Duration) -> (Summary, Vec<u64>) {
    lat.sort_unstable();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let s = Summary {
        ops: lat.len(),
        ops_per_s: lat.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        p50: q(0.5),
        p99: q(0.99),
        p999: q(0.999),
        max: lat.last().copied().unwrap_or(0),
    };
    (s, lat)
}

/// Latency samples of one paging-mode run, each with the time it ended. At the end the first 5 % of the
/// samples actually taken are discarded as warm-up (a run cut short by its time budget keeps 95 % of
/// what it measured), and the rate counts from the end of the warm-up.
struct Recorder {
    lat: Vec<u64>,
    ended_ns: Vec<u64>,
    started: Instant,
}

impl Recorder {
    fn new(max_ops: usize) -> Self {
        let cap = max_ops.min(1 << 20);
        Recorder {
            lat: Vec::with_capacity(cap),
            ended_ns: Vec::with_capacity(cap),
            started: Instant::now(),
        }
    }

    fn push(&mut self, ns: u64) {
        self.lat.push(ns);
        self.ended_ns.push(self.started.elapsed().as_nanos() as u64);
    }

    /// The summary and sorted latencies of the kept samples. Exits with an error when the run took no
    /// sample at all, rather than reporting zeros as a result.
    fn finish(mut self) -> (Summary, Vec<u64>) {
        if self.lat.is_empty() {
            eprintln!("alloc_bench: no operation finished within the time budget (raise --seconds)");
            std::process::exit(1);
        }
        let warm = self.lat.len() / 20;
        let from_ns = if warm == 0 { 0 } else { self.ended_ns[warm - 1] };
        let to_ns = *self.ended_ns.last().expect("not empty");
        let kept = self.lat.split_off(warm);
        summarize(kept, Duration::from_nanos(to_ns.saturating_sub(from_ns)))
    }
}

/// Points (latency ns, fraction of samples above it) of the complementary CDF, log-spaced in the tail.
fn ccdf(sorted: &[u64]) -> Vec<(u64, f64)> {
    let n = sorted.len();
    let mut pts: Vec<(u64, f64)> = Vec::new();
    if n == 0 {
        return pts;
    }
    for j in 0..=240 {
        let p = 1.0 - 10f64.powf(-(j as f64) / 40.0);
        let idx = ((p * n as f64) as usize).min(n - 1);
        let point = (sorted[idx], (n - 1 - idx) as f64 / n as f64);
        if pts.last() != Some(&point) {
            pts.push(point);
        }
    }
    pts
}

fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

fn json_summary(s: &Summary) -> String {
    format!(
        "\"ops\": {}, \"ops_per_s\": {:.1}, \"p50_ns\": {}, \"p99_ns\": {}, \"p999_ns\": {}, \"max_ns\": {}",
        s.ops, s.ops_per_s, s.p50, s.p99, s.p999, s.max
    )
}

fn json_ccdf(points: &[(u64, f64)]) -> String {
    let body: Vec<String> = points
        .iter()
        .map(|(l, f)| format!("[{l}, {f:.7}]"))
        .collect();
    format!("[{}]", body.join(", "))
}

fn write_json(path: &Option<String>, body: String) {
    if let Some(p) = path {
        std::fs::write(p, body).unwrap_or_else(|e| panic!("cannot write {p}: {e}"));
        eprintln!("results written to {p}");
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn touch(p: *mut u8, len: usize, v: u8) {
    for off in (0..len).step_by(PAGE) {
        // SAFETY: callers pass memory they own of at least `len` bytes.
        unsafe { ptr::write_volatile(p.add(off), v) };
    }
}

fn region_config(huge: bool) {
    let mut cfg = region::config();
    cfg.huge_pages = huge;
    region::configure(&cfg).expect("region configuration");
}

// ---- default mode: throughput of 2 MiB allocate/free cycles -------------------------------------------

#[derive(Clone, Copy)]
enum Alloc {
    Region,
    HakMalloc,
    System,
    SystemNoHuge,
    Mmap,
}

impl Alloc {
    fn name(self) -> &'static str {
        match self {
            Alloc::Region => "hakmem-region",
            Alloc::HakMalloc => "hakmem-malloc",
            Alloc::System => "sysalloc",
            Alloc::SystemNoHuge => "sysalloc+nohuge",
            Alloc::Mmap => "mmap",
        }
    }

    /// One allocate (touch) free cycle.
    fn cycle(self, touch_pages: bool) {
        let layout = Layout::from_size_align(BLOCK, 16).expect("layout");
        match self {
            Alloc::Region => {
                let (p, _, h): (_, _, Handle) = region::allocate::<u8>(BLOCK).expect("region");
                if touch_pages {
                    touch(p.as_ptr(), BLOCK, 1);
                }
                drop(black_box(h));
            }
            Alloc::HakMalloc | Alloc::System | Alloc::SystemNoHuge => {
                // SAFETY: non-zero layout; freed below with the same layout by the same allocator.
                unsafe {
                    let p = if matches!(self, Alloc::HakMalloc) {
                        HakMem.alloc(layout)
                    } else {
                        System.alloc(layout)
                    };
                    assert!(!p.is_null(), "allocation failed");
                    if matches!(self, Alloc::SystemNoHuge) {
                        let start = (p as usize + PAGE - 1) & !(PAGE - 1);
                        let end = (p as usize + BLOCK) & !(PAGE - 1);
                        libc::madvise(
                            start as *mut libc::c_void,
                            end - start,
                            libc::MADV_NOHUGEPAGE,
                        );
                    }
                    if touch_pages {
                        touch(p, BLOCK, 1);
                    }
                    if matches!(self, Alloc::HakMalloc) {
                        HakMem.dealloc(black_box(p), layout);
                    } else {
                        System.dealloc(black_box(p), layout);
                    }
                }
            }
            Alloc::Mmap => {
                // SAFETY: a fresh private anonymous mapping, unmapped with its size.
                unsafe {
                    let p = libc::mmap(
                        ptr::null_mut(),
                        BLOCK,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    assert!(p != libc::MAP_FAILED, "mmap failed");
                    if touch_pages {
                        touch(p as *mut u8, BLOCK, 1);
                    }
                    libc::munmap(black_box(p), BLOCK);
                }
            }
        }
    }
}

fn throughput(o: &Opts) {
    let cap = o.ops.unwrap_or(200_000);
    let budget = Duration::from_secs_f64(o.seconds.min(0.15));
    let variants = [
        Alloc::Region,
        Alloc::HakMalloc,
        Alloc::System,
        Alloc::SystemNoHuge,
        Alloc::Mmap,
    ];
    let mut rows = Vec::new();
    println!(
        "{:<28} {:>7} {:>12} {:>10} {:>10}",
        "allocator", "threads", "ops/s", "p50", "p99"
    );
    for threads in [1usize, 2, 4, 8, 16] {
        for touch_pages in [false, true] {
            for &a in &variants {
                let barrier = Barrier::new(threads);
                let runs: Vec<(Vec<u64>, Instant, Instant)> = thread::scope(|s| {
                    let workers: Vec<_> = (0..threads)
                        .map(|_| {
                            s.spawn(|| {
                                for _ in 0..20 {
                                    a.cycle(touch_pages); // warm-up, not measured
                                }
                                let mut lat = Vec::with_capacity(4096);
                                barrier.wait();
                                let start = Instant::now();
                                while lat.len() < cap && start.elapsed() < budget {
                                    let t = Instant::now();
                                    a.cycle(touch_pages);
                                    lat.push(t.elapsed().as_nanos() as u64);
                                }
                                (lat, start, Instant::now())
                            })
                        })
                        .collect();
                    workers
                        .into_iter()
                        .map(|w| w.join().expect("worker"))
                        .collect()
                });
                let first = runs.iter().map(|r| r.1).min().expect("one thread at least");
                let last = runs.iter().map(|r| r.2).max().expect("one thread at least");
                let lat: Vec<u64> = runs.into_iter().flat_map(|r| r.0).collect();
                let (s, _) = summarize(lat, last - first);
                let name = format!("{}{}", a.name(), if touch_pages { "+touch" } else { "" });
                println!(
                    "{:<28} {:>7} {:>12.0} {:>10} {:>10}",
                    name,
                    threads,
                    s.ops_per_s,
                    fmt_ns(s.p50),
                    fmt_ns(s.p99)
                );
                rows.push(format!(
                    "{{\"allocator\": \"{name}\", \"threads\": {threads}, {}}}",
                    json_summary(&s)
                ));
            }
        }
    }
    write_json(
        &o.json,
        format!(
            "{{\"mode\": \"throughput\", \"block_bytes\": {BLOCK}, \"rows\": [\n  {}\n]}}\n",
            rows.join(",\n  ")
        ),
    );
}

// ---- cgroup limit ---------------------------------------------------------------------------------------

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn mem_total() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(u64::MAX, |kb| kb * 1024)
}

/// Memory limit of this process's cgroup (v1 memory controller, else v2), if one is set below the RAM size.
fn cgroup_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut candidates = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            candidates.insert(
                0,
                format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"),
            );
        } else if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/memory.max"));
            candidates.push(format!("/sys/fs/cgroup/unified{path}/memory.max"));
        }
    }
    let limit = candidates.iter().find_map(|p| read_u64(p))?;
    (limit < mem_total()).then_some(limit)
}

// ---- --paging --------------------------------------------------------------------------------------------

fn paging(o: &Opts) {
    let limit = match o
        .limit_mib
        .map(|m| m as u64 * 1024 * 1024)
        .or_else(cgroup_limit)
    {
        Some(l) => l,
        None => {
            eprintln!("alloc_bench --paging: no cgroup memory limit is set (run it under one, e.g. `python3 -m lab paging`, or pass --limit-mib)");
            std::process::exit(2);
        }
    };
    region_config(o.huge);
    let nregions = (3 * limit as usize).div_ceil(BLOCK);
    println!(
        "paging: limit {} MiB, allocating {} MiB in {nregions} regions of 2 MiB",
        limit >> 20,
        (nregions * BLOCK) >> 20
    );
    let mut pool: Vec<(*mut u8, Handle)> = Vec::with_capacity(nregions);
    let fill = Instant::now();
    for i in 0..nregions {
        let (p, _, h) = region::allocate::<u8>(BLOCK).expect("region");
        touch(p.as_ptr(), BLOCK, (i % 251) as u8);
        pool.push((p.as_ptr(), h));
    }
    println!("filled in {:.1} s", fill.elapsed().as_secs_f64());

    let pages = BLOCK / PAGE;
    let max_ops = o.ops.unwrap_or(1_000_000);
    let budget = Duration::from_secs_f64(o.seconds);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut rec = Recorder::new(max_ops);
    let mut wrong = 0usize;
    let start = Instant::now();
    for _ in 0..max_ops {
        if start.elapsed() >= budget {
            break;
        }
        let r = rng.below(nregions);
        let off = rng.below(pages) * PAGE;
        let t = Instant::now();
        // SAFETY: `off` lies inside region `r`, which is alive in `pool`.
        let v = unsafe { ptr::read_volatile(pool[r].0.add(off)) };
        rec.push(t.elapsed().as_nanos() as u64);
        wrong += usize::from(v != (r % 251) as u8);
    }
    let (reads, sorted) = rec.finish();
    let read_ccdf = ccdf(&sorted);
    assert_eq!(wrong, 0, "random reads returned wrong data");

    let mut rec = Recorder::new(max_ops);
    let start = Instant::now();
    for _ in 0..max_ops {
        if start.elapsed() >= budget {
            break;
        }
        let r = rng.below(nregions);
        let t = Instant::now();
        let (p, _, h) = {
            pool.swap_remove(r);
            region::allocate::<u8>(BLOCK).expect("region")
        };
        // SAFETY: the first page of a live region.
        unsafe { ptr::write_volatile(p.as_ptr(), 1) };
        rec.push(t.elapsed().as_nanos() as u64);
        pool.push((p.as_ptr(), h));
    }
    let (realloc, _) = rec.finish();
    println!(
        "{:<22} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "", "ops/s", "p50", "p99", "p99.9", "max"
    );
    for (name, s) in [("random_read", &reads), ("realloc+touch", &realloc)] {
        println!(
            "{:<22} {:>12.0} {:>10} {:>10} {:>10} {:>10}",
            name,
            s.ops_per_s,
            fmt_ns(s.p50),
            fmt_ns(s.p99),
            fmt_ns(s.p999),
            fmt_ns(s.max)
        );
    }
    write_json(
        &o.json,
        format!(
            "{{\"mode\": \"paging\", \"limit_bytes\": {limit}, \"allocated_bytes\": {}, \"huge_pages\": {},\n \
             \"random_read\": {{{}, \"ccdf\": {}}},\n \"realloc_touch\": {{{}}}}}\n",
            nregions * BLOCK,
            o.huge,
            json_summary(&reads),
            json_ccdf(&read_ccdf),
            json_summary(&realloc)
        ),
    );
}

// ---- --ratio-sweep ---------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Strategy {
    Baseline,
    Random,
    Sequential,
    PrefetchThread,
    BatchPrefetch,
}

impl Strategy {
    fn name(self, o: &Opts) -> String {
        match self {
            Strategy::Baseline => "baseline".into(),
            Strategy::Random => "MADV_RANDOM".into(),
            Strategy::Sequential => "MADV_SEQUENTIAL".into(),
            Strategy::PrefetchThread => format!("prefetch thread ({} ahead)", o.ahead),
            Strategy::BatchPrefetch => format!("batch{}+prefetch", o.batch),
        }
    }
}

/// Random page reads over the working set under one strategy; returns the summary and sorted latencies.
fn sweep_run(
    o: &Opts,
    h: &Handle,
    npages: usize,
    strategy: Strategy,
    seed: u64,
) -> (Summary, Vec<u64>) {
    let base = h.as_ptr();
    let max_ops = o.ops.unwrap_or(1_000_000);
    let mut rng = Rng(seed);
    let seq: Vec<u32> = (0..max_ops).map(|_| rng.below(npages) as u32).collect();
    let advice = match strategy {
        Strategy::Random => libc::MADV_RANDOM,
        Strategy::Sequential => libc::MADV_SEQUENTIAL,
        _ => libc::MADV_NORMAL,
    };
    // SAFETY: the working set is the live region behind `h`.
    unsafe { libc::madvise(base as *mut libc::c_void, npages * PAGE, advice) };
    let budget = Duration::from_secs_f64(o.seconds);
    let pos = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let mut wrong = 0usize;
    let result = thread::scope(|s| {
        if let Strategy::PrefetchThread = strategy {
            s.spawn(|| {
                let mut next = 0;
                while !done.load(Ordering::Relaxed) && next < seq.len() {
                    if next >= pos.load(Ordering::Relaxed) + o.ahead {
                        thread::yield_now();
                        continue;
                    }
                    let page = seq[next] as usize * PAGE;
                    h.prefetch(page..page + PAGE).expect("prefetch: a range inside the region, a hint the kernel accepts");
                    next += 1;
                }
            });
        }
        let mut rec = Recorder::new(seq.len());
        let start = Instant::now();
        let mut i = 0;
        while i < seq.len() && start.elapsed() < budget {
            let t = Instant::now();
            if let Strategy::BatchPrefetch = strategy {
                if i % o.batch == 0 {
                    for &pg in &seq[i..(i + o.batch).min(seq.len())] {
                        let page = pg as usize * PAGE;
                        h.prefetch(page..page + PAGE).expect("prefetch: a range inside the region, a hint the kernel accepts");
                    }
                }
            }
            let page = seq[i] as usize;
            // SAFETY: `page` < npages, inside the live region.
            let v = unsafe { ptr::read_volatile(base.add(page * PAGE)) };
            rec.push(t.elapsed().as_nanos() as u64);
            wrong += usize::from(v != (page % 251) as u8);
            i += 1;
            pos.store(i, Ordering::Relaxed);
        }
        done.store(true, Ordering::Relaxed);
        rec.finish()
    });
    // SAFETY: as above.
    unsafe { libc::madvise(base as *mut libc::c_void, npages * PAGE, libc::MADV_NORMAL) };
    assert_eq!(wrong, 0, "reads returned wrong data");
    result
}

fn ratio_sweep(o: &Opts) {
    region_config(o.huge);
    let bytes = o.total_mib << 20;
    let (p, _, h) = region::allocate::<u8>(bytes).expect("working set region");
    let npages = bytes / PAGE;
    let limit = o
        .limit_mib
        .map(|m| m as u64 * 1024 * 1024)
        .or_else(cgroup_limit);
    let limit_text = limit.map_or("none".to_string(), |l| format!("{} MiB", l >> 20));
    println!(
        "ratio sweep: working set {} MiB, cgroup limit {limit_text}",
        o.total_mib
    );
    let fill = Instant::now();
    for pg in 0..npages {
        // SAFETY: inside the region.
        unsafe { ptr::write_volatile(p.as_ptr().add(pg * PAGE), (pg % 251) as u8) };
    }
    println!("filled in {:.1} s", fill.elapsed().as_secs_f64());
    println!(
        "{:<28} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "strategy", "ops/s", "p50", "p99", "p99.9", "max"
    );
    let strategies = [
        Strategy::Baseline,
        Strategy::Random,
        Strategy::Sequential,
        Strategy::PrefetchThread,
        Strategy::BatchPrefetch,
    ];
    let mut out = String::new();
    for (k, &st) in strategies.iter().enumerate() {
        let (s, sorted) = sweep_run(o, &h, npages, st, 0x1234_5678 + k as u64 * 7919);
        let name = st.name(o);
        println!(
            "{:<28} {:>12.0} {:>10} {:>10} {:>10} {:>10}",
            name,
            s.ops_per_s,
            fmt_ns(s.p50),
            fmt_ns(s.p99),
            fmt_ns(s.p999),
            fmt_ns(s.max)
        );
        if !out.is_empty() {
            out.push_str(",\n  ");
        }
        let _ = write!(
            out,
            "{{\"strategy\": \"{name}\", {}, \"ccdf\": {}}}",
            json_summary(&s),
            json_ccdf(&ccdf(&sorted))
        );
    }
    let limit_json = limit.map_or("null".to_string(), |l| l.to_string());
    write_json(
        &o.json,
        format!(
            "{{\"mode\": \"ratio-sweep\", \"total_bytes\": {bytes}, \"limit_bytes\": {limit_json}, \"huge_pages\": {}, \
             \"ahead\": {}, \"batch\": {},\n \"strategies\": [\n  {out}\n]}}\n",
            o.huge, o.ahead, o.batch
        ),
    );
    drop(h);
}

fn main() {
    let o = parse_args();
    match o.mode {
        Mode::Throughput => throughput(&o),
        Mode::Paging => paging(&o),
        Mode::RatioSweep => ratio_sweep(&o),
    }
}
