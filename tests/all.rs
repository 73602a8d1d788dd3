//! Black-box tests: they start the real `shard` binary on port 0, read the
//! address it prints, and talk to it over real sockets. One test binary for
//! the whole suite keeps link times down (docs/ARCHITECTURE.md, "Tests").
// A panic in a test is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
