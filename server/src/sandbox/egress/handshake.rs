//! What a client says before the gate decides: an HTTP `CONNECT`, an
//! absolute-form HTTP request, or a SOCKS5 greeting and request, each read
//! to a [`Request`] within bounds; and a refusal answered in the client's
//! own dialect.

use std::io;
use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{
    CONNECT_DEADLINE, Client, LINGER_BYTES, LINGER_TIME, MAX_HEAD, MAX_HEADERS, SOCKS5, Target, Via,
};

/// Which protocol a client speaks, and so how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Http,
    Socks5,
}

/// A request read in full, not yet decided.
#[derive(Debug)]
pub(super) struct Request {
    pub target: Target,
    pub via: Via,
    /// Bytes for the target before the relay starts: a plain request's
    /// rewritten head, then whatever the client sent after its request.
    pub upstream_prefix: Vec<u8>,
}

/// Why a connection is not made; each maps to one answer per dialect.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    #[error("{0}")]
    BadRequest(String),
    #[error("the request head is over {} bytes or {} headers", MAX_HEAD, MAX_HEADERS)]
    HeadTooLarge,
    #[error("no SOCKS5 method without authentication was offered")]
    NoAcceptableMethod,
    #[error("SOCKS5 command {0:#04x} is not supported; only CONNECT is")]
    UnsupportedCommand(u8),
    #[error("SOCKS5 address type {0:#04x} is not supported")]
    UnsupportedAddressType(u8),
    #[error("Shard's sandbox refused a connection to {0}")]
    Denied(Target),
    #[error(
        "Shard's sandbox refused {host}: it resolves only to this machine's own addresses (loopback, link-local or unspecified)"
    )]
    OwnMachine { host: String },
    #[error("cannot resolve {host}: {error}")]
    Unresolved { host: String, error: io::Error },
    #[error("cannot connect to {target}: {error}")]
    Unreachable { target: Target, error: io::Error },
    #[error("{target} did not answer within {secs} s", secs = CONNECT_DEADLINE.as_secs())]
    TimedOut { target: Target },
}

impl Refusal {
    pub(super) fn http_status(&self) -> &'static str {
        match self {
            Refusal::BadRequest(_)
            | Refusal::NoAcceptableMethod
            | Refusal::UnsupportedCommand(_)
            | Refusal::UnsupportedAddressType(_) => "400 Bad Request",
            Refusal::HeadTooLarge => "431 Request Header Fields Too Large",
            Refusal::Denied(_) | Refusal::OwnMachine { .. } => "403 Forbidden",
            Refusal::Unresolved { .. } | Refusal::Unreachable { .. } | Refusal::TimedOut { .. } => {
                "502 Bad Gateway"
            }
        }
    }

    /// RFC 1928 §6's reply field.
    pub(super) fn socks_reply(&self) -> SocksReply {
        match self {
            Refusal::BadRequest(_) | Refusal::HeadTooLarge | Refusal::NoAcceptableMethod => {
                SocksReply::GeneralFailure
            }
            Refusal::UnsupportedCommand(_) => SocksReply::CommandNotSupported,
            Refusal::UnsupportedAddressType(_) => SocksReply::AddressTypeNotSupported,
            Refusal::Denied(_) | Refusal::OwnMachine { .. } => SocksReply::NotAllowed,
            Refusal::Unreachable { error, .. }
                if error.kind() == io::ErrorKind::ConnectionRefused =>
            {
                SocksReply::ConnectionRefused
            }
            Refusal::Unreachable { error, .. }
                if error.kind() == io::ErrorKind::NetworkUnreachable =>
            {
                SocksReply::NetworkUnreachable
            }
            Refusal::Unresolved { .. } | Refusal::Unreachable { .. } | Refusal::TimedOut { .. } => {
                SocksReply::HostUnreachable
            }
        }
    }

    /// A whole HTTP response saying why, in plain text.
    pub(super) fn http_answer(&self) -> Vec<u8> {
        let body = format!("{self}\n");
        format!(
            "HTTP/1.1 {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.http_status(),
            body.len()
        )
        .into_bytes()
    }
}

/// Answers a refusal in the client's dialect; the connection then closes.
pub(super) async fn refuse(client: &mut impl Client, dialect: Dialect, refusal: &Refusal) {
    match dialect {
        Dialect::Socks5 => {
            let answer = match refusal {
                // §3: no acceptable method is answered in place of the method.
                Refusal::NoAcceptableMethod => vec![SOCKS5, 0xFF],
                _ => socks5_reply(refusal.socks_reply()).to_vec(),
            };
            let _ = client.write_all(&answer).await;
        }
        Dialect::Http => {
            if client.write_all(&refusal.http_answer()).await.is_err()
                || client.shutdown().await.is_err()
            {
                return;
            }
            let mut chunk = [0u8; 4096];
            let mut discarded = 0;
            let drain = async {
                while discarded < LINGER_BYTES {
                    match client.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(read) => discarded += read,
                    }
                }
            };
            let _ = tokio::time::timeout(LINGER_TIME, drain).await;
        }
    }
}

// ---------------------------------------------------------------- HTTP

/// Reads an HTTP/1.x proxy request head whose first byte was `first`.
pub(super) async fn http_handshake(
    client: &mut (impl AsyncRead + Unpin),
    first: u8,
) -> Result<Request, Refusal> {
    if matches!(first, b'\r' | b'\n') {
        // RFC 9112 §2.2 lets a server skip empty lines here; refusing them
        // instead makes the first blank line the end of the head.
        return Err(Refusal::BadRequest("an empty line before the request line".to_owned()));
    }
    let mut head = Vec::with_capacity(1024);
    head.push(first);
    let mut chunk = [0u8; 4096];
    loop {
        let room = MAX_HEAD.saturating_sub(head.len()).min(chunk.len());
        if room == 0 {
            return Err(Refusal::HeadTooLarge);
        }
        let read = client.read(&mut chunk[..room]).await.map_err(|error| {
            Refusal::BadRequest(format!("the request could not be read: {error}"))
        })?;
        if read == 0 {
            return Err(Refusal::BadRequest("the request ended before its head did".to_owned()));
        }
        let scan_from = head.len().saturating_sub(2);
        head.extend_from_slice(&chunk[..read]);
        // Parsed only once its blank line may have come: a client that
        // sends its head a byte at a time must not have it parsed 16 Ki
        // times.
        let new = &head[scan_from..];
        let blank_line = new.windows(2).any(|pair| pair == b"\n\n")
            || new.windows(3).any(|triple| triple == b"\n\r\n");
        if blank_line && let Some(request) = parse_http(&head)? {
            return Ok(request);
        }
    }
}

/// Parses what has arrived of an HTTP proxy request: `None` until the head
/// is complete, then the request (any bytes after the head go with it).
pub(super) fn parse_http(bytes: &[u8]) -> Result<Option<Request>, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    let head_len = match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::HeadTooLarge),
        Err(error) => return Err(Refusal::BadRequest(format!("not an HTTP/1.x request: {error}"))),
    };
    let (Some(method), Some(uri), Some(version)) = (parsed.method, parsed.path, parsed.version)
    else {
        return Err(Refusal::BadRequest("not an HTTP/1.x request".to_owned()));
    };
    let rest = &bytes[head_len..];
    if method.eq_ignore_ascii_case("CONNECT") {
        let target = parse_authority(uri, None)?;
        return Ok(Some(Request { target, via: Via::HttpConnect, upstream_prefix: rest.to_vec() }));
    }
    let Some((scheme, after)) = uri.split_once("://") else {
        return Err(Refusal::BadRequest(
            "this is Shard's egress proxy: send a proxy request (CONNECT host:port, or an absolute http:// URL)"
                .to_owned(),
        ));
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(Refusal::BadRequest(format!(
            "only http:// URLs are proxied as plain requests; use CONNECT for {scheme}://"
        )));
    }
    // Everything after the authority is the origin-form target; a fragment
    // is the client's own and never sent.
    let after = after.split_once('#').map_or(after, |(before, _)| before);
    let split = after.find(['/', '?']).unwrap_or(after.len());
    let (authority, path) = after.split_at(split);
    let target = parse_authority(authority, Some(80))?;
    let origin = match path.as_bytes().first() {
        Some(b'/') => path.to_owned(),
        _ => format!("/{path}"),
    };

    let mut head = Vec::with_capacity(head_len + 64);
    head.extend_from_slice(format!("{method} {origin} HTTP/1.{version}\r\n").as_bytes());
    // RFC 9112 §3.2.2: a proxy replaces Host with the URL's authority, so
    // the target serves the host the gate decided, whatever Host said.
    let host = if target.port == 80 { target.url_host().into_owned() } else { target.to_string() };
    head.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    for header in parsed.headers.iter() {
        if !DROPPED_HEADERS.iter().any(|name| header.name.eq_ignore_ascii_case(name)) {
            head.extend_from_slice(header.name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(header.value);
            head.extend_from_slice(b"\r\n");
        }
    }
    // One connection carries one request: a second, perhaps for another
    // host, must not reach this target over a connection the gate allowed.
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head.extend_from_slice(rest);
    Ok(Some(Request { target, via: Via::Http, upstream_prefix: head }))
}

/// Headers of a plain request the target never sees: Host (replaced by the
/// URL's), the hop-by-hop ones (RFC 9110 §7.6.1) and the proxy's own.
pub(super) const DROPPED_HEADERS: [&str; 5] =
    ["host", "connection", "keep-alive", "proxy-connection", "proxy-authorization"];

/// `host:port`, `[v6]:port`, or (with a default port) the host alone.
pub(super) fn parse_authority(
    authority: &str,
    default_port: Option<u16>,
) -> Result<Target, Refusal> {
    let bad = || Refusal::BadRequest(format!("`{authority}` is not a host and port"));
    if authority.contains('@') {
        // Not echoed: the part before `@` is a password.
        return Err(Refusal::BadRequest("a proxied URL may not carry credentials".to_owned()));
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (v6, after) = bracketed.split_once(']').ok_or_else(bad)?;
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad());
        }
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or_else(bad)?),
        };
        (v6, port)
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port.parse::<u16>().ok().filter(|port| *port != 0).ok_or_else(bad)?,
        None => default_port.ok_or_else(|| {
            Refusal::BadRequest(format!("`{authority}` has no port; CONNECT needs host:port"))
        })?,
    };
    Ok(Target { host: parse_host(host)?, port })
}

/// A host as the gate sees it: an IP literal in its canonical text, or a
/// lower-cased DNS name.
pub(super) fn parse_host(host: &str) -> Result<String, Refusal> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip.to_string());
    }
    let name = host.to_ascii_lowercase();
    let labels: Vec<&str> = name.strip_suffix('.').unwrap_or(&name).split('.').collect();
    let valid_label = |label: &&str| {
        (1..=63).contains(&label.len())
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    // A last label that does not start with a letter is no DNS name but
    // one of the numeric forms the system resolver reads as an address
    // (`2130706433`, `127.1`, `0x7f.1`): the gate would see one host and
    // the connection go to another.
    let named =
        labels.last().is_some_and(|last| last.starts_with(|c: char| c.is_ascii_alphabetic()));
    if name.len() > 253 || !labels.iter().all(valid_label) || !named {
        return Err(Refusal::BadRequest(format!("`{host}` is not a host name or IP address")));
    }
    Ok(name)
}

// --------------------------------------------------------------- SOCKS5

/// RFC 1928 §6's reply codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum SocksReply {
    Succeeded = 0x00,
    GeneralFailure = 0x01,
    NotAllowed = 0x02,
    NetworkUnreachable = 0x03,
    HostUnreachable = 0x04,
    ConnectionRefused = 0x05,
    CommandNotSupported = 0x07,
    AddressTypeNotSupported = 0x08,
}

/// A reply with the bound address 0.0.0.0:0: the client has no use for
/// the daemon's side of the connection.
pub(super) fn socks5_reply(reply: SocksReply) -> [u8; 10] {
    [SOCKS5, reply as u8, 0x00, 0x01, 0, 0, 0, 0, 0, 0]
}

/// The rest of a SOCKS5 greeting (its version byte read), the method
/// choice, and the CONNECT request (RFC 1928 §3–§5).
pub(super) async fn socks5_handshake(client: &mut impl Client) -> Result<Request, Refusal> {
    let broken =
        |error: io::Error| Refusal::BadRequest(format!("a broken SOCKS5 request: {error}"));
    let count = client.read_u8().await.map_err(broken)?;
    let mut methods = vec![0u8; usize::from(count)];
    client.read_exact(&mut methods).await.map_err(broken)?;
    const NO_AUTHENTICATION: u8 = 0x00;
    if !methods.contains(&NO_AUTHENTICATION) {
        return Err(Refusal::NoAcceptableMethod);
    }
    client.write_all(&[SOCKS5, NO_AUTHENTICATION]).await.map_err(broken)?;

    let mut fixed = [0u8; 4];
    client.read_exact(&mut fixed).await.map_err(broken)?;
    let [version, command, _reserved, address_type] = fixed;
    if version != SOCKS5 {
        return Err(Refusal::BadRequest(format!("SOCKS version {version} in a SOCKS5 request")));
    }
    const CONNECT: u8 = 0x01;
    if command != CONNECT {
        return Err(Refusal::UnsupportedCommand(command));
    }
    let host = match address_type {
        0x01 => {
            let mut octets = [0u8; 4];
            client.read_exact(&mut octets).await.map_err(broken)?;
            std::net::Ipv4Addr::from(octets).to_string()
        }
        0x03 => {
            let length = client.read_u8().await.map_err(broken)?;
            let mut name = vec![0u8; usize::from(length)];
            client.read_exact(&mut name).await.map_err(broken)?;
            let name = String::from_utf8(name)
                .map_err(|_| Refusal::BadRequest("a host name that is not text".to_owned()))?;
            parse_host(&name)?
        }
        0x04 => {
            let mut octets = [0u8; 16];
            client.read_exact(&mut octets).await.map_err(broken)?;
            std::net::Ipv6Addr::from(octets).to_string()
        }
        other => return Err(Refusal::UnsupportedAddressType(other)),
    };
    let port = client.read_u16().await.map_err(broken)?;
    if port == 0 {
        return Err(Refusal::BadRequest("port 0".to_owned()));
    }
    Ok(Request { target: Target { host, port }, via: Via::Socks5, upstream_prefix: Vec::new() })
}
