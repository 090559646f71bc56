//! build.rs — compiles libhakmem's C sources (src/*.c) into the crate with the flags of the Makefile's
//! CFLAGS_BASE, plus -DHAK_NO_OVERRIDE=1 so the Rust binary keeps its own malloc/free: only the hak_*
//! functions are linked in.
use std::path::Path;

/// The Makefile's CFLAGS_BASE without -O2, -g and -fPIC (set through cc's own options below) and without
/// the include paths. tests/test_rust.py checks this list against the Makefile.
const CFLAGS_BASE: &[&str] = &[
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-fvisibility=hidden",
    "-fno-builtin-malloc",
    "-fno-builtin-free",
    "-fno-builtin-calloc",
    "-fno-builtin-realloc",
    "-ftls-model=initial-exec",
    "-fno-plt",
];

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut sources: Vec<_> = std::fs::read_dir(&src)
        .expect("src/ holds libhakmem's C sources")
        .map(|entry| entry.expect("readable src/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    sources.sort();

    let mut build = cc::Build::new();
    build
        .files(&sources)
        .include(root.join("include"))
        .include(&src)
        .define("HAK_NO_OVERRIDE", "1")
        .opt_level(2)
        .debug(true)
        .pic(true)
        .warnings(false);
    for flag in CFLAGS_BASE {
        build.flag(flag);
    }
    build.compile("hakmem");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=include/hakmem.h");
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
}
