//! The client-message decoder (every command type of PROTOCOL.md): any text
//! gets a message or an error, never a panic, and a message it accepts
//! encodes to a text that decodes to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shard_protocol::{ClientMessage, Envelope};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(message) = Envelope::<ClientMessage>::from_json(text) else { return };
    let Ok(encoded) = serde_json::to_string(&message) else { return };
    let again = Envelope::<ClientMessage>::from_json(&encoded)
        .unwrap_or_else(|error| panic!("{encoded} does not decode: {error:?}"));
    assert_eq!(again, message, "{encoded}");
});
