//! The scheduler configuration (`KubeSchedulerConfiguration` YAML).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| muster_fuzz::config(data));
