//! Pod JSON of every dialect (membership, quantities, affinity, tolerations),
//! and the same bytes as a node.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| muster_fuzz::pod(data));
