//! The protocol crate's tests, one binary (see docs/ARCHITECTURE.md, "Tests").
mod suite;
