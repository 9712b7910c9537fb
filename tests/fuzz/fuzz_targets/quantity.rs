//! Resource quantities ("500m", "7Ei", "1e3"): parse, or say why.
#![no_main]

use libfuzzer_sys::fuzz_target;
use muster::model::Quantity;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match Quantity::parse(s) {
        Ok(q) => {
            let _ = (
                q.value(),
                q.milli_value(),
                q.checked_milli_value(),
                q.to_string(),
            );
        }
        Err(e) => assert!(!e.reason.is_empty()),
    }
});
