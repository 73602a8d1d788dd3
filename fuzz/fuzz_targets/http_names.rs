//! Host, Origin and X-Forwarded-For syntax (protocol/src/web.rs), which the
//! daemon checks on every request: no input panics, normal forms are
//! stable, and what one parser accepts the others agree with.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shard_protocol::web::{
    appended_forwarded_for, normalize_host, normalize_origin, parse_host_port, parse_origin,
    well_formed_host,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = appended_forwarded_for(text);
    for scheme in ["http", "https"] {
        let once = normalize_host(text, scheme);
        assert_eq!(normalize_host(&once, scheme), once, "normalize_host is idempotent");
    }
    if well_formed_host(text) {
        assert!(!text.contains(['/', '@', ' ', ',', '\r', '\n', '\t']), "{text:?}");
    }
    if let Some((host, port)) = parse_host_port(text) {
        assert!(port > 0);
        assert!(well_formed_host(&format!("{host}:{port}")), "{host}:{port} from {text:?}");
    }
    if let Some(origin) = parse_origin(text) {
        assert_eq!(parse_origin(&origin).as_deref(), Some(origin.as_str()), "from {text:?}");
        assert_eq!(normalize_origin(&origin), origin);
        let (_, host) = origin.split_once("://").expect("a scheme");
        assert!(well_formed_host(host), "{origin} from {text:?}");
    }
});
