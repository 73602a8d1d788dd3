//! The session-log reader (agent/src/session_log.rs): any bytes are a log or
//! SESSION_CORRUPT, never a panic, and a log it accepts, written out again
//! line by line, reads back as the same entries.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shard_platform::session_log::decode_log;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzzed/session.jsonl");
    let Ok(entries) = decode_log(path, data.to_vec()) else { return };
    let mut written = Vec::new();
    for entry in &entries {
        written.extend(serde_json::to_vec(entry).expect("an entry encodes"));
        written.push(b'\n');
    }
    let again = decode_log(path, written.clone()).unwrap_or_else(|error| {
        panic!("{} does not read back: {error}", String::from_utf8_lossy(&written))
    });
    assert_eq!(again, entries);
});
