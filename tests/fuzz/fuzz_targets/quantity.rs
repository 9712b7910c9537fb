//! Resource quantities ("500m", "7Ei", "1e3"): parse, or say why.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| muster_fuzz::quantity(data));
