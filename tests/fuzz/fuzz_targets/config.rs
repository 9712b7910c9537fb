//! The scheduler configuration (`KubeSchedulerConfiguration` YAML).
#![no_main]

use libfuzzer_sys::fuzz_target;
use muster::config::SchedulerConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = SchedulerConfig::from_yaml(s) {
        assert!(!e.to_string().is_empty());
    }
});
