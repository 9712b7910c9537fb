//! Group definitions of every dialect (PodGroup, Workload, Coscheduling,
//! Volcano), with Muster's timeout annotation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| muster_fuzz::group_definition(data));
