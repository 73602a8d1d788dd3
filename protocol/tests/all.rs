//! The protocol crate's tests, one binary (see docs/ARCHITECTURE.md, "Tests").
// A panic in a test is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
