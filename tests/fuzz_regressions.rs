//! The fuzzers' kept corpus as regression cases in `make test`: every input
//! under `tests/fuzz/regressions/<target>/` (libFuzzer's corpus, minimized
//! with `cargo fuzz cmin` after `make fuzz`, plus the seeds) goes through the
//! same property its fuzz target checks — never a panic, a refusal always
//! says something. The properties live in `tests/fuzz/src/lib.rs`, shared
//! with the fuzz targets.

#[path = "fuzz/src/lib.rs"]
mod props;

use std::path::Path;

/// Runs `check` on every file of `tests/fuzz/{regressions,corpus}/<target>/`
/// (the corpus directory holds the committed seeds); returns how many.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut n = 0;
    for dir in ["regressions", "corpus"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            let data = std::fs::read(&path).expect("read corpus file");
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(outcome.is_ok(), "{target}: {} fails", path.display());
            n += 1;
        }
    }
    n
}

/// A fuzz target's name and the property it checks.
type Target = (&'static str, fn(&[u8]));

#[test]
fn kept_fuzz_inputs_still_pass() {
    let targets: [Target; 5] = [
        ("quantity", props::quantity),
        ("selector", props::selector),
        ("pod", props::pod),
        ("group_definition", props::group_definition),
        ("config", props::config),
    ];
    for (target, check) in targets {
        let n = replay(target, check);
        eprintln!("fuzz regressions: {target}: {n} inputs");
        assert!(n > 0, "no kept inputs for {target}");
    }
}
