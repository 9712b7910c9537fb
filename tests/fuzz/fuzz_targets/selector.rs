//! Label and field selectors as `muster cluster` reads them from a query.
#![no_main]

use libfuzzer_sys::fuzz_target;
use muster::apiserver::selectors::{FieldSelector, LabelSelector};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match LabelSelector::parse(s) {
        Ok(sel) => {
            let _ = sel.matches(|k| (k.len() % 2 == 0).then_some("1"));
        }
        Err(e) => assert!(!e.is_empty()),
    }
    match FieldSelector::parse(s) {
        Ok(sel) => {
            let _ = sel.matches(|p| Some(p.to_string()));
        }
        Err(e) => assert!(!e.is_empty()),
    }
});
