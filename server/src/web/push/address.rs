//! Which addresses a push may go to: the public internet only
//! (docs/SECURITY.md, "SSRF through Web Push"). An address is judged by
//! what it really is, however it is written: an IPv6 address that carries
//! an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`,
//! IPv4-translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4
//! `2002:AABB:CCDD::`) is judged by that IPv4 address, which reaches the
//! same host through a translator or relay.
//!
//! Refused: every block of IANA's special-purpose registries (IPv4 and
//! IPv6) except the plain public ones, and, for IPv6, anything outside the
//! global unicast space `2000::/3` that does not carry an IPv4 address.
//! Both the subscription check and the sender's resolver ask [`public`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 blocks no push goes to (IANA IPv4 Special-Purpose Address
/// Registry, with multicast and the reserved space).
const NOT_PUBLIC_V4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "\"this network\""),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private"),
    (Ipv4Addr::new(100, 64, 0, 0), 10, "shared address space"),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link-local"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private"),
    (Ipv4Addr::new(192, 0, 0, 0), 24, "IETF protocol assignments"),
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation"),
    (Ipv4Addr::new(192, 31, 196, 0), 24, "AS112"),
    (Ipv4Addr::new(192, 52, 193, 0), 24, "AMT"),
    (Ipv4Addr::new(192, 88, 99, 0), 24, "6to4 relay anycast"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private"),
    (Ipv4Addr::new(192, 175, 48, 0), 24, "AS112"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking"),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved"),
];

/// IPv6 blocks inside `2000::/3` no push goes to (IANA IPv6
/// Special-Purpose Address Registry); 6to4 (`2002::/16`) is not here: it
/// is judged by the IPv4 address it carries.
const NOT_PUBLIC_V6: &[(Ipv6Addr, u8, &str)] = &[
    // Teredo (2001::/32), ORCHID, AMT, AS112 and the other IETF ones.
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23, "IETF protocol assignments"),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, "documentation"),
    (Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0), 48, "AS112"),
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, "documentation"),
];

/// What an address is, when it is not public.
fn class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => class_v4(ip),
        IpAddr::V6(ip) => match embedded_v4(ip) {
            Some(v4) => class_v4(v4),
            None => class_v6(ip),
        },
    }
}

fn class_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    NOT_PUBLIC_V4
        .iter()
        .find(|(block, length, _)| bits >> (32 - length) == u32::from(*block) >> (32 - length))
        .map(|(_, _, what)| *what)
}

fn class_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let bits = u128::from(ip);
    // Global unicast is 2000::/3; everything else (loopback, unspecified,
    // discard-only 100::/64, local-use NAT64 64:ff9b:1::/48, SRv6
    // 5f00::/16, unique local fc00::/7, link-local fe80::/10, site-local
    // fec0::/10, multicast ff00::/8, and what is unassigned) is not public.
    if bits >> 125 != 1 {
        return Some(match ip.segments()[0] {
            0 => "loopback, unspecified or reserved",
            0xfc00..=0xfdff => "unique local",
            0xfe80..=0xfebf => "link-local",
            0xfec0..=0xfeff => "site-local",
            0xff00..=0xffff => "multicast",
            _ => "not global unicast",
        });
    }
    NOT_PUBLIC_V6
        .iter()
        .find(|(block, length, _)| bits >> (128 - length) == u128::from(*block) >> (128 - length))
        .map(|(_, _, what)| *what)
}

/// The IPv4 address an IPv6 one stands for, if it carries one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let o = ip.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match ip.segments() {
        // IPv4-mapped ::ffff:0:0/96 and IPv4-compatible ::/96 (`::` and
        // `::1` among them: judged as 0.0.0.0 and 0.0.0.1, not public
        // either).
        [0, 0, 0, 0, 0, 0xffff | 0, _, _] => Some(last),
        // IPv4-translated ::ffff:0:0:0/96 (RFC 2765).
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(last),
        // NAT64's well-known prefix 64:ff9b::/96 (RFC 6052).
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last),
        // 6to4 2002::/16 (RFC 3056): the IPv4 address follows the prefix.
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

/// Whether a push may go to `ip`; else why not.
pub fn public(ip: IpAddr) -> Result<(), super::Unfit> {
    match class(ip) {
        None => Ok(()),
        Some(what) => Err(super::Unfit::NotPublicAddress { ip, what }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_public(text: &str) -> bool {
        public(text.parse().expect("an address")).is_ok()
    }

    #[test]
    fn public_addresses_in_any_spelling_are_public() {
        for address in [
            "8.8.8.8",
            "1.1.1.1",
            "142.250.74.42",
            "2606:4700::1111",
            "2a00:1450:4007:80e::200a",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_public(address), "{address}");
        }
    }

    #[test]
    fn local_and_special_addresses_are_not_in_any_spelling() {
        for address in [
            "127.0.0.1",
            "10.1.2.3",
            "172.31.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "192.0.0.8",
            "192.0.2.1",
            "192.31.196.1",
            "192.52.193.1",
            "192.88.99.1",
            "192.175.48.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::127.0.0.1",
            "::10.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:192.168.0.1",
            "::ffff:0:10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::169.254.169.254",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2001:20::1",
            "2620:4f:8000::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "4000::1",
        ] {
            assert!(!is_public(address), "{address}");
        }
        let said = public("::ffff:0:a00:1".parse().expect("address")).expect_err("private");
        assert!(said.to_string().contains("not public (private)"), "{said}");
    }
}
