//! Opaque identifiers.

/// 48 random bits as hex: an opaque id (agents, principals, sessions), not
/// a secret.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 6];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
