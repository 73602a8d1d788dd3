//! JSONL framing (protocol/src/jsonl.rs) against a model of it: whatever
//! the line limit and however the bytes are split into reads, the decoder
//! yields exactly what splitting the whole input on `\n` says it should.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shard_protocol::jsonl::{LineDecoder, LineError};

/// What the lines of `input` should decode to, taken whole.
fn model(input: &[u8], max_line: usize) -> Vec<Result<String, LineError>> {
    let mut expected = Vec::new();
    for segment in input.split(|&byte| byte == b'\n') {
        let line = segment.strip_suffix(b"\r").unwrap_or(segment);
        if line.is_empty() {
            continue;
        }
        expected.push(if line.len() > max_line {
            Err(LineError::TooLong { limit: max_line })
        } else {
            String::from_utf8(line.to_vec()).map_err(|_| LineError::InvalidUtf8)
        });
    }
    expected
}

fuzz_target!(|data: &[u8]| {
    let [limit, chunk, input @ ..] = data else { return };
    let max_line = 1 + usize::from(*limit % 64);
    let chunk = 1 + usize::from(*chunk % 16);
    let mut decoder = LineDecoder::new(max_line);
    let mut decoded = Vec::new();
    for read in input.chunks(chunk) {
        decoder.feed(read);
        while let Some(line) = decoder.next_line() {
            decoded.push(line);
        }
    }
    while let Some(line) = decoder.finish() {
        decoded.push(line);
    }
    assert_eq!(decoded, model(input, max_line));
});
