//! Fuzz target: arbitrary text as a node's `server.properties` (and as one `--override`):
//! every malformed line or value must be an error naming the line or key, never a panic; what
//! parses must give a consistent config (data directory, roles, quorum settings).

#![no_main]

use libfuzzer_sys::fuzz_target;
use logjam_node::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (file, override_line) = text.split_once('\u{0}').unwrap_or((text, ""));
    let overrides: Vec<String> = if override_line.is_empty() {
        Vec::new()
    } else {
        vec![override_line.to_owned()]
    };
    match Config::parse(file, &overrides) {
        Ok(config) => {
            let _ = config.data_dir();
            let _ = (config.is_broker(), config.is_controller());
            let _ = config.quorum_config();
        }
        Err(error) => {
            let _ = error.to_string();
        }
    }
});
