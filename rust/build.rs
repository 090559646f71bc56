//! build.rs — compiles libhakmem's C sources (src/*.c) into the crate with the Makefile's CFLAGS_BASE
//! (read from the Makefile, so the two builds cannot drift apart) plus -DHAK_NO_OVERRIDE=1, so the Rust
//! program keeps its own malloc/free and only the hak_* functions are linked in.
use std::path::Path;

/// The words of the Makefile's `CFLAGS_BASE := ...` assignment (with its continuation lines).
fn makefile_cflags(makefile: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut inside = false;
    for line in makefile.lines() {
        let rest = if inside {
            line
        } else if let Some(rest) = line.trim_start().strip_prefix("CFLAGS_BASE") {
            match rest
                .trim_start()
                .strip_prefix(":=")
                .or_else(|| rest.trim_start().strip_prefix('='))
            {
                Some(value) => value,
                None => continue,
            }
        } else {
            continue;
        };
        let trimmed = rest.trim_end();
        inside = trimmed.ends_with('\\');
        words.extend(
            trimmed
                .trim_end_matches('\\')
                .split_whitespace()
                .map(str::to_owned),
        );
        if !inside {
            break;
        }
    }
    words
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let makefile =
        std::fs::read_to_string(root.join("Makefile")).expect("the Makefile holds CFLAGS_BASE");
    let flags = makefile_cflags(&makefile);
    assert!(
        flags.iter().any(|f| f.starts_with("-std=")),
        "CFLAGS_BASE not found in the Makefile"
    );

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
        .warnings(false);
    for flag in &flags {
        // Include paths are relative to the Makefile's directory: given above as absolute paths instead.
        if !flag.starts_with("-I") {
            build.flag(flag);
        }
    }
    build.compile("hakmem");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rerun-if-changed=Makefile");
    println!("cargo:rerun-if-changed=include/hakmem.h");
    println!("cargo:rerun-if-changed=src");
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
}
