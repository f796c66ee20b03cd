//! Fuzz target: arbitrary text as a nemesis script (`logjam run --nemesis-script FILE`) for one
//! to seven nodes; a bad line must be an error naming it, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&nodes, rest)) = data.split_first() else {
        return;
    };
    if let Ok(text) = std::str::from_utf8(rest) {
        if let Err(error) = logjam::timeline::parse(text, usize::from(nodes % 7) + 1) {
            let _ = format!("{error:#}");
        }
    }
});
