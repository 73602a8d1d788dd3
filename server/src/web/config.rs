//! The daemon's web configuration, validated before anything binds
//! (PROTOCOL.md §4.1.1–§4.1.2, CONTRACT.md "Command line"): loopback by
//! default; direct non-loopback or behind a trusted reverse proxy only when
//! asked for, with every unsafe or malformed combination refused, naming the
//! flag.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use axum::http::HeaderName;
use shard_protocol::web::{normalize_host, parse_host_port, parse_origin};

/// The web half of `shard daemon`'s flags (CONTRACT.md "Command line").
#[derive(Debug, Clone, clap::Args)]
pub struct WebArgs {
    /// TCP port; 0 picks a free one: the port this home last listened on
    /// if it is free (so enrolled browsers keep their origin), else any.
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// The address to listen on (an IP literal). Anything but 127.0.0.1 is
    /// remote mode: --public-host and --allowed-origin become required.
    #[arg(long, value_name = "IP")]
    pub web_host: Option<String>,
    /// The HOST:PORT browsers use to reach the daemon (remote modes).
    #[arg(long, value_name = "HOST:PORT")]
    pub public_host: Option<String>,
    /// An origin (scheme://host[:port]) allowed to use the daemon (remote
    /// modes); repeat for several.
    #[arg(long, value_name = "ORIGIN")]
    pub allowed_origin: Vec<String>,
    /// Accept remote access over plain http: the session cookie can then be
    /// read by anyone on the network path.
    #[arg(long)]
    pub allow_insecure_remote: bool,
    /// Trust X-Forwarded-Proto/-Host from this peer only: `loopback` or one IP.
    #[arg(long, value_name = "UPSTREAM")]
    pub trust_proxy: Option<String>,
    /// The header a trusted proxy sets to the original scheme.
    #[arg(long, value_name = "NAME", default_value = "X-Forwarded-Proto")]
    pub forwarded_proto_header: String,
    /// The header a trusted proxy sets to the original Host.
    #[arg(long, value_name = "NAME", default_value = "X-Forwarded-Host")]
    pub forwarded_host_header: String,
    /// A browser session unused this long must enroll again (default 7 days).
    #[arg(long, value_name = "SECS", default_value_t = 7 * 24 * 3600)]
    pub session_idle_timeout: u64,
    /// A browser session ends this long after enrollment (default 30 days).
    #[arg(long, value_name = "SECS", default_value_t = 30 * 24 * 3600)]
    pub session_max_age: u64,
    /// How long an enrollment or pairing link stays valid: 10 minutes, or
    /// less.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub enroll_code_ttl: u64,
    /// For tests only: accept Web Push endpoints over plain http and on
    /// local addresses (a fake push service), which are otherwise refused.
    #[arg(long, hide = true)]
    pub insecure_push_endpoints: bool,
    /// For tests only: the push client finds NAME at IP (`NAME=IP`, as if
    /// its DNS said so), so that a test can point a public-looking name at
    /// this machine. What it finds is judged as any answer of DNS is.
    #[arg(long, hide = true, value_name = "NAME=IP", value_parser = name_at_address)]
    pub push_resolve: Vec<(String, IpAddr)>,
    /// How long a notification's Allow and Deny work, in seconds (hidden:
    /// tests shorten it to see an action expire).
    #[arg(long, hide = true, default_value_t = 300)]
    pub push_action_ttl: u64,
}

/// Why a `--push-resolve` value was refused.
#[derive(Debug, thiserror::Error)]
pub enum NotNameAtAddress {
    #[error("expected NAME=IP")]
    NoEquals,
    #[error("{0:?} is not an IP address")]
    NotAddress(String),
}

/// `NAME=IP`, for `--push-resolve`.
pub fn name_at_address(value: &str) -> Result<(String, IpAddr), NotNameAtAddress> {
    let (name, address) = value.split_once('=').ok_or(NotNameAtAddress::NoEquals)?;
    let address = address.parse().map_err(|_| NotNameAtAddress::NotAddress(address.to_owned()))?;
    Ok((name.trim_end_matches('.').to_ascii_lowercase(), address))
}

/// How the daemon is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// 127.0.0.1 only, plain http (§4.1.1).
    Loopback,
    /// A non-loopback address, plain http, on a trusted network.
    Direct,
    /// Behind a reverse proxy that terminates TLS.
    Proxy,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Direct => "direct",
            Self::Proxy => "proxy",
        }
    }
}

/// The one peer whose forwarded headers are honored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// 127.0.0.1 or ::1.
    Loopback,
    Ip(IpAddr),
}

impl Upstream {
    pub fn matches(self, peer: IpAddr) -> bool {
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match self {
            Self::Loopback => {
                peer == IpAddr::V4(Ipv4Addr::LOCALHOST) || peer == IpAddr::V6(Ipv6Addr::LOCALHOST)
            }
            Self::Ip(ip) => peer == ip,
        }
    }
}

#[derive(Debug, Clone)]
pub struct WebConfig {
    pub bind: SocketAddr,
    pub mode: Mode,
    /// The pinned public `host[:port]` (remote modes), normalized.
    pub public_host: Option<String>,
    /// Allowed origins, normalized (remote modes; loopback adds its own).
    pub allowed_origins: Vec<String>,
    pub trust_proxy: Option<Upstream>,
    pub allow_insecure: bool,
    pub proto_header: HeaderName,
    pub host_header: HeaderName,
    pub session_idle: Duration,
    pub session_max_age: Duration,
    /// How long an enrollment code lives (CONTRACT.md: 10 minutes at most).
    pub enroll_code_ttl: Duration,
}

/// A refused configuration: which flag, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub flag: &'static str,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.flag, self.message)
    }
}

impl std::error::Error for ConfigError {}

fn refuse(flag: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError { flag, message: message.into() }
}

/// `--web-host`: an IP address, loopback by default; never a hostname.
fn web_host(args: &WebArgs) -> Result<IpAddr, ConfigError> {
    match &args.web_host {
        None => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        Some(value) => value.parse().map_err(|_| {
            refuse("--web-host", format!("{value:?} is not an IP address (hostnames are refused)"))
        }),
    }
}

/// `--trust-proxy`: `loopback` or one exact address.
fn trust_proxy(args: &WebArgs) -> Result<Option<Upstream>, ConfigError> {
    match args.trust_proxy.as_deref() {
        None => Ok(None),
        Some("loopback") => Ok(Some(Upstream::Loopback)),
        Some(value) => value.parse::<IpAddr>().map(|ip| Some(Upstream::Ip(ip))).map_err(|_| {
            refuse(
                "--trust-proxy",
                format!(
                    "{value:?} must be `loopback` or one exact IP address (no hostname, no CIDR)"
                ),
            )
        }),
    }
}

/// `--public-host`, as `HOST:PORT`.
fn public_host(args: &WebArgs) -> Result<Option<String>, ConfigError> {
    let Some(value) = &args.public_host else { return Ok(None) };
    let (host, port) = parse_host_port(value)
        .ok_or_else(|| refuse("--public-host", format!("{value:?} must be HOST:PORT")))?;
    Ok(Some(format!("{host}:{port}")))
}

/// Every `--allowed-origin`, each an exact origin.
fn allowed_origins(args: &WebArgs) -> Result<Vec<String>, ConfigError> {
    args.allowed_origin
        .iter()
        .map(|value| {
            parse_origin(value).ok_or_else(|| {
                refuse("--allowed-origin", format!("{value:?} must be http(s)://HOST[:PORT] with no path, wildcard or trailing slash"))
            })
        })
        .collect()
}

/// Loopback mode takes none of the remote flags.
fn check_loopback(args: &WebArgs) -> Result<(), ConfigError> {
    for (given, flag) in [
        (args.public_host.is_some(), "--public-host"),
        (!args.allowed_origin.is_empty(), "--allowed-origin"),
        (args.allow_insecure_remote, "--allow-insecure-remote"),
    ] {
        if given {
            return Err(refuse(
                flag,
                "only applies in remote mode (--web-host other than 127.0.0.1, or --trust-proxy)",
            ));
        }
    }
    Ok(())
}

/// Remote mode needs a public host and an origin, and plain http only when
/// asked for in so many words.
fn check_remote(
    args: &WebArgs,
    mode: Mode,
    public_host: Option<&str>,
    allowed_origins: &[String],
) -> Result<(), ConfigError> {
    if public_host.is_none() {
        return Err(refuse("--public-host", "is required in remote mode (§4.1.2 D3)"));
    }
    if allowed_origins.is_empty() {
        return Err(refuse("--allowed-origin", "at least one is required in remote mode"));
    }
    let plaintext =
        mode == Mode::Direct || allowed_origins.iter().any(|origin| origin.starts_with("http://"));
    if plaintext && !args.allow_insecure_remote {
        return Err(refuse(
            "--allow-insecure-remote",
            "remote access over plain http exposes the session cookie; add this flag to accept that on a trusted network",
        ));
    }
    if !plaintext && args.allow_insecure_remote {
        return Err(refuse(
            "--allow-insecure-remote",
            "every allowed origin is https; this flag would only weaken nothing and is refused to avoid confusion",
        ));
    }
    Ok(())
}

impl WebConfig {
    pub fn from_args(args: &WebArgs) -> Result<Self, ConfigError> {
        let web_host = web_host(args)?;
        let trust_proxy = trust_proxy(args)?;
        let remote = web_host != IpAddr::V4(Ipv4Addr::LOCALHOST) || trust_proxy.is_some();
        let mode = match (remote, trust_proxy) {
            (false, _) => Mode::Loopback,
            (true, Some(_)) => Mode::Proxy,
            (true, None) => Mode::Direct,
        };
        let public_host = public_host(args)?;
        let allowed_origins = allowed_origins(args)?;
        let header = |flag: &'static str, value: &str| {
            HeaderName::try_from(value.to_ascii_lowercase())
                .map_err(|_| refuse(flag, format!("{value:?} is not a header name")))
        };
        let proto_header = header("--forwarded-proto-header", &args.forwarded_proto_header)?;
        let host_header = header("--forwarded-host-header", &args.forwarded_host_header)?;
        if remote {
            check_remote(args, mode, public_host.as_deref(), &allowed_origins)?;
        } else {
            check_loopback(args)?;
        }
        if args.session_idle_timeout == 0 || args.session_max_age == 0 {
            return Err(refuse("--session-idle-timeout", "session lifetimes must be positive"));
        }
        Ok(Self {
            bind: SocketAddr::new(web_host, args.port),
            mode,
            public_host,
            allowed_origins,
            trust_proxy,
            allow_insecure: args.allow_insecure_remote,
            proto_header,
            host_header,
            session_idle: Duration::from_secs(args.session_idle_timeout),
            session_max_age: Duration::from_secs(args.session_max_age),
            enroll_code_ttl: Duration::from_secs(args.enroll_code_ttl),
        })
    }

    /// The origin printed in enrollment URLs: the allowed origin of the
    /// public host (remote), or `http://127.0.0.1:PORT`.
    pub fn public_origin(&self, local: SocketAddr) -> String {
        match &self.public_host {
            None => format!("http://{local}"),
            Some(host) => self
                .allowed_origins
                .iter()
                .find(|origin| {
                    let scheme = origin.split("://").next().unwrap_or("http");
                    normalize_host(origin.split("://").nth(1).unwrap_or(""), scheme)
                        == normalize_host(host, scheme)
                })
                .or(self.allowed_origins.first())
                .cloned()
                .unwrap_or_else(|| format!("http://{host}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_match_exactly() {
        assert!(Upstream::Loopback.matches("127.0.0.1".parse().expect("ip")));
        assert!(Upstream::Loopback.matches("::1".parse().expect("ip")));
        assert!(!Upstream::Loopback.matches("127.0.0.2".parse().expect("ip")));
        assert!(
            Upstream::Ip("10.0.0.1".parse().expect("ip"))
                .matches("::ffff:10.0.0.1".parse().expect("ip"))
        );
    }
}
