//! Fuzz target: arbitrary bytes as a history file, through the reader (`HistoryReader`: header,
//! every op line, the torn tail) and the checkers (`check_reader`, what `logjam check` runs).
//! Bad input must come back as errors naming the line, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use logjam_history::HistoryReader;

fuzz_target!(|data: &[u8]| {
    if let Ok(reader) = HistoryReader::new(data) {
        for op in reader {
            if let Err(error) = op {
                // Every error renders (its message names the line).
                let _ = error.to_string();
            }
        }
    }
    if let Ok(report) = logjam_checkers::check_reader(data) {
        let _ = report.summary();
        let _ = report.to_json();
    }
});
