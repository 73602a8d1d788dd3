//! The sandbox around every agent (CONTRACT.md, "Sandbox").
//!
//! - [`egress`]: the daemon's egress proxy, one per agent.

pub mod egress;
