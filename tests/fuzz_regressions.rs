//! The fuzzers' kept corpus as regression cases in `make test`: every input
//! of `tests/fuzz/regressions/<target>.bin` (libFuzzer's corpus after
//! `make fuzz`, minimized with `cargo fuzz cmin`, packed as a sequence of
//! 4-byte little-endian lengths each followed by that many bytes:
//! `make fuzz-keep` writes it) and the committed seeds in
//! `tests/fuzz/corpus/<target>/` go through the same property its fuzz
//! target checks — never a panic, a refusal always says something. The
//! properties live in `tests/fuzz/src/lib.rs`, shared with the targets.

#[path = "fuzz/src/lib.rs"]
mod props;

use std::path::Path;

/// The inputs packed in `file`: length-prefixed entries.
fn unpack(file: &Path) -> Vec<Vec<u8>> {
    let Ok(bytes) = std::fs::read(file) else {
        return Vec::new();
    };
    let mut inputs = Vec::new();
    let mut rest = bytes.as_slice();
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        assert!(len <= tail.len(), "{}: truncated entry", file.display());
        let (input, tail) = tail.split_at(len);
        inputs.push(input.to_vec());
        rest = tail;
    }
    inputs
}

/// Runs `check` on every kept input of `target` (the packed regressions
/// and the seed files); returns how many.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut inputs = unpack(&root.join("regressions").join(format!("{target}.bin")));
    if let Ok(entries) = std::fs::read_dir(root.join("corpus").join(target)) {
        for entry in entries.flatten() {
            let path = entry.path();
            let is_seed = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("seed-"));
            if is_seed {
                inputs.push(std::fs::read(&path).expect("read seed"));
            }
        }
    }
    for (i, input) in inputs.iter().enumerate() {
        let outcome = std::panic::catch_unwind(|| check(input));
        assert!(
            outcome.is_ok(),
            "{target}: kept input #{i} fails: {input:?}"
        );
    }
    inputs.len()
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
