//! Fuzz target: arbitrary text as a scenario file (`logjam scenario FILE`): directives and
//! timeline steps; a bad line must be an error naming it, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(error) = logjam::scenario::parse("fuzz", text) {
            let _ = format!("{error:#}");
        }
    }
});
