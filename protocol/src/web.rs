//! The bodies of the browser's JSON HTTP routes (CONTRACT.md, and `/pair`,
//! docs/SECURITY.md): what the page posts to `/enroll` and what it answers,
//! what `/bootstrap` answers, and what `/pair` answers. Shared like every
//! other message, so the page and the daemon cannot disagree on them either.

use std::net::{IpAddr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// `POST /enroll`: the single-use code from an enrollment link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollRequest {
    pub code: String,
}

/// `POST /enroll`'s answer. The browser secret is shown this once: the page
/// keeps it in its origin's storage and sends it to `/bootstrap` in the
/// [`BROWSER_SECRET_HEADER`] (docs/SECURITY.md, "A cookie read on another
/// port").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollAnswer {
    pub principal_id: String,
    pub browser_secret: String,
}

/// The request header that carries the browser secret to `/bootstrap`.
pub const BROWSER_SECRET_HEADER: &str = "shard-browser-secret";

/// `POST /bootstrap`'s answer: a short-lived, single-use WebSocket ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bootstrap {
    pub ticket: String,
    pub expires_in_ms: u64,
    /// The WebSocket subprotocol to offer with the ticket.
    pub protocol: String,
}

/// `POST /pair`'s answer: a one-time enrollment link for another device,
/// made by an enrolled browser (docs/SECURITY.md, "Pairing a device").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairAnswer {
    /// The daemon's public origin and `/#enroll=<CODE>`, as `shard enroll`
    /// prints it.
    pub url: String,
    /// How long the link stays valid from now, unless used first.
    pub expires_in_ms: u64,
    /// The link as a QR code: an SVG document, drawn by the daemon.
    pub qr_svg: String,
    /// Whether the link's origin is the daemon's loopback address (loopback
    /// mode), which another device would open on itself: the link works on
    /// this computer only, and the page says so instead of offering its QR
    /// code to a phone.
    #[serde(default)]
    pub local_only: bool,
}

/// Shard extension (docs/PROTOCOL-NOTES.md, "pair_used"): the pairing link
/// this browser session made was used; a browser enrolled with it, and it
/// works no more. Sent to that session's own connections only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairUsed {
    /// When, in milliseconds since the Unix epoch.
    pub at: u64,
}

/// The tag of a question's notification (docs/NOTIFICATIONS.md): the
/// daemon's push of it and the page's own notification of it share it, so
/// that one replaces the other and the question's end closes both. It
/// names the agent too, for every agent numbers its own questions
/// (`perm-1`): a request id alone would let one agent's question replace,
/// or its end close, another's.
pub fn question_tag(agent_id: &str, request_id: &str) -> String {
    format!("question:{agent_id}:{request_id}")
}

// Host and Origin syntax (CONTRACT.md), checked by the daemon on every
// request: plain functions of strings, so they are fuzzed alone (fuzz/).

/// Lower-cases and drops the scheme's default port, so `HOST:443` over https
/// equals `HOST` (CONTRACT.md). Only a host of one port loses it: of
/// `HOST:8787:80` nothing is dropped, so a malformed host can never become
/// a well-formed one, and normalizing twice changes nothing more (both
/// found by fuzz/http_names).
pub fn normalize_host(host: &str, scheme: &str) -> String {
    let host = host.to_ascii_lowercase();
    let default = if scheme == "https" { ":443" } else { ":80" };
    let Some(name) = host.strip_suffix(default) else { return host };
    let one_port = match name.strip_prefix('[') {
        Some(bracketed) => bracketed.strip_suffix(']').is_some_and(|inside| !inside.contains(']')),
        None => !name.contains(':'),
    };
    if one_port && !name.is_empty() { name.to_owned() } else { host }
}

/// Whether `host` is what CONTRACT.md calls a Host: `name[:port]`, or
/// `[v6]` with an optional `:port`, the port at most one, of digits. Checked
/// before any comparison, since dropping a default port would otherwise
/// turn `127.0.0.1:8787:80` into the expected host.
pub fn well_formed_host(host: &str) -> bool {
    let port_ok =
        |port: &str| (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = host.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else { return false };
        return address.parse::<Ipv6Addr>().is_ok()
            && (after.is_empty() || after.strip_prefix(':').is_some_and(port_ok));
    }
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        && port.is_none_or(port_ok)
}

pub fn normalize_origin(origin: &str) -> String {
    let origin = origin.to_ascii_lowercase();
    match origin.split_once("://") {
        Some((scheme, host)) => format!("{scheme}://{}", normalize_host(host, scheme)),
        None => origin,
    }
}

/// `host:port` with an explicit port; the host a name or an IP literal.
pub fn parse_host_port(value: &str) -> Option<(String, u16)> {
    if value.is_empty() || value.contains(['/', '?', '#', '@', '*', ' ']) || value.contains("://") {
        return None;
    }
    let (host, port) = value.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|port| *port > 0)?;
    let host = host.to_ascii_lowercase();
    let bracketed = host.starts_with('[') && host.ends_with(']');
    let valid_name = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        });
    let valid_v6 = bracketed && host[1..host.len() - 1].parse::<Ipv6Addr>().is_ok();
    (valid_name || valid_v6).then_some((host, port))
}

/// `scheme://host[:port]`: http or https, no path, no trailing slash, no
/// wildcard, not `null`.
pub fn parse_origin(value: &str) -> Option<String> {
    let (scheme, rest) = value.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let default = if scheme == "https" { 443 } else { 80 };
    let with_port =
        if rest.rsplit_once(':').is_some_and(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            && !rest.ends_with(']')
        {
            rest.to_owned()
        } else {
            format!("{rest}:{default}")
        };
    let (host, port) = parse_host_port(&with_port)?;
    Some(normalize_origin(&format!("{scheme}://{host}:{port}")))
}

/// The address a proxy appended to an `X-Forwarded-For` value: its last,
/// since anything before it the client wrote.
pub fn appended_forwarded_for(value: &str) -> Option<IpAddr> {
    value.rsplit(',').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_strict() {
        assert_eq!(
            parse_origin("https://Shard.Example.com").as_deref(),
            Some("https://shard.example.com")
        );
        assert_eq!(
            parse_origin("https://shard.example.com:443").as_deref(),
            Some("https://shard.example.com")
        );
        assert_eq!(parse_origin("http://10.0.0.5:8787").as_deref(), Some("http://10.0.0.5:8787"));
        for bad in [
            "null",
            "https://*.example.com",
            "https://a.example/",
            "https://a.example/path",
            "ftp://a.example",
            "a.example",
            "https://",
        ] {
            assert_eq!(parse_origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn host_ports_need_a_port() {
        assert_eq!(
            parse_host_port("shard.example.com:443"),
            Some(("shard.example.com".into(), 443))
        );
        assert_eq!(parse_host_port("shard.example.com"), None);
        assert_eq!(parse_host_port("https://x:1"), None);
        assert_eq!(parse_host_port("x/y:1"), None);
    }

    #[test]
    fn hosts_have_one_port_at_most() {
        for good in ["127.0.0.1:8787", "shard.example", "[::1]:8787", "[::1]"] {
            assert!(well_formed_host(good), "{good}");
        }
        for bad in ["127.0.0.1:8787:80", "", ":80", "[::1", "[::1]80", "a b", "a:123456", "[x]:1"] {
            assert!(!well_formed_host(bad), "{bad}");
        }
    }

    #[test]
    fn only_a_single_default_port_is_dropped() {
        assert_eq!(normalize_host("Shard.Example:443", "https"), "shard.example");
        assert_eq!(normalize_host("[::1]:80", "http"), "[::1]");
        assert_eq!(normalize_host("127.0.0.1:8787", "http"), "127.0.0.1:8787");
        for kept in ["127.0.0.1:8787:80", ":::80:80", ":80", "[::1]]:80", "[a]:[b]:80"] {
            assert_eq!(normalize_host(kept, "http"), kept, "{kept}");
        }
        assert_eq!(normalize_origin("http://127.0.0.1:8787:80"), "http://127.0.0.1:8787:80");
    }

    #[test]
    fn the_appended_forwarded_address_is_the_last() {
        assert_eq!(appended_forwarded_for("1.2.3.4, 10.0.0.9"), "10.0.0.9".parse().ok());
        assert_eq!(appended_forwarded_for(" ::1 "), "::1".parse().ok());
        assert_eq!(appended_forwarded_for("1.2.3.4, junk"), None);
    }
}
