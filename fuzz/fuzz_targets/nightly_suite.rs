//! Fuzz target: arbitrary text as a nightly suite (`logjam nightly SUITE`): TOML, unknown keys,
//! bad names, fault lists and settings must be errors naming the key or line, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // Scripts are looked up beside the suite; the fuzz inputs name none that exist.
        if let Err(error) = logjam::nightly::parse_suite(text, std::path::Path::new("/nonexistent")) {
            let _ = format!("{error:#}");
        }
    }
});
