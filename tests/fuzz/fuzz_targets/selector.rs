//! Label and field selectors as `muster cluster` reads them from a query.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| muster_fuzz::selector(data));
