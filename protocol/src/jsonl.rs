//! JSONL framing for the stdio and unix-socket transports (§2.1).
//!
//! Lines are split on `\n` only, and one trailing `\r` is stripped so CRLF
//! input works. U+2028 and U+2029 are ordinary characters here: they are valid
//! inside JSON strings, which is exactly why a line splitter that treats them
//! as line breaks (Node's `readline`) must not be used.
//!
//! [`LineDecoder`] is sans-IO: the transport feeds it whatever a read returned
//! and takes out whole lines, so the same code serves tokio readers in the
//! daemon and the agent, and tests can split input at any byte. Memory stays
//! bounded: a line longer than the limit is reported once, as soon as it
//! crosses the limit, and its remaining bytes are dropped as they arrive until
//! the next `\n`, after which decoding carries on with the next line.

use std::collections::VecDeque;
use std::fmt;

/// The default longest line, in bytes (not counting the `\n` or a `\r`).
/// Tool results can be large, but a single message of more than this is a bug
/// or an attack, and holding it would cost that much memory per connection.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Why a line was skipped. The decoder stays usable after either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// The line exceeded the limit; its bytes were discarded.
    TooLong { limit: usize },
    /// The line is not valid UTF-8 (§2.3).
    InvalidUtf8,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong { limit } => write!(f, "line longer than {limit} bytes was discarded"),
            Self::InvalidUtf8 => f.write_str("line is not valid UTF-8"),
        }
    }
}

impl std::error::Error for LineError {}

/// Splits a byte stream into JSONL lines.
#[derive(Debug)]
pub struct LineDecoder {
    max_line: usize,
    /// Bytes of the line being read, not yet terminated.
    partial: Vec<u8>,
    /// Dropping an over-long line's bytes until its `\n`.
    discarding: bool,
    /// Lines (or errors) decoded and not yet taken.
    ready: VecDeque<Result<String, LineError>>,
}

impl Default for LineDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_BYTES)
    }
}

impl LineDecoder {
    pub fn new(max_line: usize) -> Self {
        Self { max_line, partial: Vec::new(), discarding: false, ready: VecDeque::new() }
    }

    pub fn max_line(&self) -> usize {
        self.max_line
    }

    /// Takes in the bytes of one read. Completed lines become available from
    /// [`next_line`](Self::next_line); call it until `None` before feeding more.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&byte| byte == b'\n');
            if self.discarding {
                match newline {
                    Some(at) => {
                        self.discarding = false;
                        bytes = &bytes[at + 1..];
                    }
                    None => return,
                }
                continue;
            }
            match newline {
                Some(at) => {
                    let (head, rest) = (&bytes[..at], &bytes[at + 1..]);
                    if self.partial.len() + head.len() > self.max_line + 1 {
                        // Let go of what the over-long line grew, not only its bytes.
                        self.partial = Vec::new();
                        self.ready.push_back(Err(LineError::TooLong { limit: self.max_line }));
                    } else {
                        self.partial.extend_from_slice(head);
                        self.complete_line();
                    }
                    bytes = rest;
                }
                None => {
                    // One byte of slack for a `\r` that may precede the `\n`.
                    if self.partial.len() + bytes.len() > self.max_line + 1 {
                        // Let go of what the over-long line grew, not only its bytes.
                        self.partial = Vec::new();
                        self.discarding = true;
                        self.ready.push_back(Err(LineError::TooLong { limit: self.max_line }));
                    } else {
                        self.partial.extend_from_slice(bytes);
                    }
                    return;
                }
            }
        }
    }

    /// The next complete line, or an error for a line that was skipped.
    /// Empty lines (and lines of a lone `\r`) are skipped silently.
    pub fn next_line(&mut self) -> Option<Result<String, LineError>> {
        self.ready.pop_front()
    }

    /// At end of input: a last line that had no `\n`, if any.
    pub fn finish(&mut self) -> Option<Result<String, LineError>> {
        if self.discarding {
            self.discarding = false;
            return self.ready.pop_front();
        }
        if !self.partial.is_empty() {
            self.complete_line();
        }
        self.ready.pop_front()
    }

    fn complete_line(&mut self) {
        let mut line = std::mem::take(&mut self.partial);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.is_empty() {
            return;
        }
        if line.len() > self.max_line {
            self.ready.push_back(Err(LineError::TooLong { limit: self.max_line }));
            return;
        }
        self.ready.push_back(String::from_utf8(line).map_err(|_| LineError::InvalidUtf8));
    }
}

/// Frames one encoded message as a JSONL line. serde_json escapes `\n` and
/// `\r` inside strings, so the only newline is the terminator.
pub fn frame(json: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(json.len() + 1);
    line.extend_from_slice(json.as_bytes());
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_over_long_line_leaves_no_buffer_behind() {
        let mut decoder = LineDecoder::new(1024);
        decoder.feed(&[b'x'; 1000]);
        decoder.feed(&[b'x'; 1000]);
        assert_eq!(decoder.partial.capacity(), 0);
        decoder.feed(b"\nok\n");
        assert_eq!(decoder.next_line(), Some(Err(LineError::TooLong { limit: 1024 })));
        assert_eq!(decoder.next_line(), Some(Ok("ok".to_owned())));
        decoder.feed(&[b'y'; 1000]);
        decoder.feed(&[b'y'; 1000]);
        decoder.feed(b"\n");
        assert_eq!(decoder.next_line(), Some(Err(LineError::TooLong { limit: 1024 })));
        assert_eq!(decoder.partial.capacity(), 0);
    }
}
