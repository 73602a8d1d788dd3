//! The egress proxy: an agent's only way out of its sandbox's network
//! namespace (CONTRACT.md "Sandbox"). The daemon makes one unix socket per
//! agent, binds it into that agent's sandbox and serves it here; whoever
//! connects is that agent, so the protocol carries no credentials. Inside,
//! `crate::sandbox::forwarder` accepts TCP on loopback and hands each connection
//! over the socket whole; it is served here in the socket's place, and a
//! client that hands nothing over speaks on the socket itself.
//!
//! Each connection names one target, by HTTP `CONNECT`, by an absolute-form
//! HTTP request, or by SOCKS5 (the first byte tells which); a [`Gate`]
//! decides it (the allow-list, or a question to a person), and only then is
//! the target resolved and connected, and bytes relayed
//! (`crate::sandbox::relay`, with `splice(2)`) until either side ends.
//! Everything before the gate is bounded in bytes and in time; the gate's
//! own wait is not, since a person may take minutes.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod handshake;

use self::handshake::{
    Dialect, Refusal, Request, SocksReply, http_handshake, refuse, socks5_handshake, socks5_reply,
};

/// Connections one proxy serves at once. Each holds two sockets in the
/// daemon; an agent that wants more is misbehaving, and this keeps one agent
/// from spending the daemon's file descriptors.
pub const MAX_CONNECTIONS: usize = 64;
/// The most bytes of an HTTP request head (request line and headers). Real
/// clients send well under 8 KiB; a bigger head is answered 431.
pub const MAX_HEAD: usize = 16 * 1024;
/// Everything before the gate is asked (the request head or the SOCKS5
/// greeting and request) must arrive within this, so an idle connection
/// cannot hold one of the [`MAX_CONNECTIONS`] slots.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// Resolving the target and connecting to it.
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(10);
/// Bytes a client may send after its request while the gate decides (a
/// request body, a TLS hello sent early); kept for the target. Past this
/// the proxy stops reading until the verdict.
const MAX_EARLY: usize = 64 * 1024;
/// After an HTTP refusal the proxy reads and discards what the client still
/// sends, at most this much for at most [`LINGER_TIME`], so that closing
/// with unread bytes does not reset the connection before the client has
/// read the answer.
const LINGER_BYTES: usize = 64 * 1024;
const LINGER_TIME: Duration = Duration::from_secs(1);
/// Headers of one HTTP request head; more is answered 431.
const MAX_HEADERS: usize = 128;
/// The SOCKS protocol version, and so the first byte of a SOCKS5 client.
const SOCKS5: u8 = 0x05;

/// Where a connection goes, as the client named it: a lower-cased DNS name
/// or an IP literal (IPv6 without brackets, in its canonical text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl Target {
    /// The host as a URL writes it: an IPv6 address in brackets.
    fn url_host(&self) -> std::borrow::Cow<'_, str> {
        if self.host.contains(':') {
            format!("[{}]", self.host).into()
        } else {
            self.host.as_str().into()
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.url_host(), self.port)
    }
}

/// A gate's answer for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
}

/// How the client asked for its connection (shown to the person asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `CONNECT host:port`: a tunnel, usually for TLS.
    HttpConnect,
    /// A plain HTTP request in absolute form (`GET http://host/…`).
    Http,
    /// A SOCKS5 `CONNECT`.
    Socks5,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::HttpConnect => "HTTP CONNECT",
            Via::Http => "HTTP",
            Via::Socks5 => "SOCKS5",
        })
    }
}

/// Decides each connection: the allow-list, or a question to a person
/// (which may wait minutes; the proxy sets no deadline on it).
///
/// If the client hangs up (or half-closes) while the answer is pending, the
/// proxy drops the future and closes the connection: a gate that asked a
/// person may withdraw the question when its future is dropped.
pub trait Gate: Send + Sync + 'static {
    /// `asker`: which process asked, as the sandbox's forwarder says (to
    /// show, never to trust).
    fn decide(
        &self,
        target: Target,
        via: Via,
        asker: Option<String>,
    ) -> BoxFuture<'static, Verdict>;
}

/// Turns a target's host into addresses: names it knows first (exact,
/// case-insensitive), else DNS.
///
/// A name found by DNS is never connected on an address of the daemon's own
/// machine (loopback, unspecified, link-local): the person allowed a name,
/// and its owner could point it at the daemon's own services (DNS
/// rebinding). An IP literal goes where it says, since the gate saw it.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    known: Vec<(String, IpAddr)>,
}

impl Resolver {
    /// Every name by DNS.
    pub fn dns() -> Self {
        Self::default()
    }

    /// These names without DNS (and exempt from the own-machine rule),
    /// every other by DNS.
    pub fn with_known(known: impl IntoIterator<Item = (String, IpAddr)>) -> Self {
        let known = known.into_iter().map(|(name, ip)| (name.to_ascii_lowercase(), ip)).collect();
        Self { known }
    }

    /// The addresses to try for `target`, in order.
    async fn addresses(&self, target: &Target) -> Result<Vec<SocketAddr>, Refusal> {
        if let Ok(ip) = target.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, target.port)]);
        }
        let known: Vec<SocketAddr> = self
            .known
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(&target.host))
            .map(|(_, ip)| SocketAddr::new(*ip, target.port))
            .collect();
        if !known.is_empty() {
            return Ok(known);
        }
        let found: Vec<SocketAddr> = tokio::net::lookup_host((target.host.as_str(), target.port))
            .await
            .map_err(|error| Refusal::Unresolved { host: target.host.clone(), error })?
            .collect();
        let outside: Vec<SocketAddr> =
            found.iter().copied().filter(|address| !is_own_machine(address.ip())).collect();
        match (found.is_empty(), outside.is_empty()) {
            (true, _) => Err(Refusal::Unresolved {
                host: target.host.clone(),
                error: io::Error::new(io::ErrorKind::NotFound, "no address"),
            }),
            (false, true) => Err(Refusal::OwnMachine { host: target.host.clone() }),
            (false, false) => Ok(outside),
        }
    }
}

/// Addresses that reach the daemon's own machine rather than the network.
fn is_own_machine(ip: IpAddr) -> bool {
    // `::ffff:127.0.0.1` is 127.0.0.1.
    let ip = ip.to_canonical();
    ip.is_loopback()
        || ip.is_unspecified()
        || match ip {
            IpAddr::V4(v4) => v4.is_link_local(),
            IpAddr::V6(v6) => v6.is_unicast_link_local(),
        }
}

/// Serves one agent's proxy socket until `stop`; the handle ends once every
/// connection has closed (each ends at `stop`).
pub fn serve(
    listener: UnixListener,
    gate: Arc<dyn Gate>,
    resolver: Arc<Resolver>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(accept(listener, gate, resolver, stop))
}

async fn accept(
    listener: UnixListener,
    gate: Arc<dyn Gate>,
    resolver: Arc<Resolver>,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let connections = TaskTracker::new();
    // Warn once per run of refusals, not once per connection of an agent
    // that keeps trying.
    let mut warned = false;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let Ok((client, _)) = accepted else { continue };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if !warned {
                tracing::warn!(
                    limit = MAX_CONNECTIONS,
                    "an agent has too many egress connections; closing new ones"
                );
                warned = true;
            }
            continue;
        };
        warned = false;
        let (gate, resolver, stop) = (gate.clone(), resolver.clone(), stop.clone());
        connections.spawn(async move {
            tokio::select! {
                () = connection(client, gate.as_ref(), &resolver) => {}
                () = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
    connections.close();
    connections.wait().await;
}

/// The preface line after its opening byte: which process asked, as text
/// that can be shown (controls dropped); `None` if it is too long or
/// never ends, `Some("")` when the forwarder could not tell.
async fn preface(client: &mut UnixStream) -> Option<String> {
    let mut line = Vec::new();
    loop {
        let byte = client.read_u8().await.ok()?;
        if byte == b'\n' {
            break;
        }
        if line.len() >= crate::sandbox::forwarder::MAX_PREFACE {
            return None;
        }
        line.push(byte);
    }
    let text = String::from_utf8_lossy(&line);
    Some(text.chars().filter(|c| !c.is_control()).collect())
}

/// A client's stream: the proxy's own socket, or a connection handed over
/// on it.
trait Client: AsyncRead + AsyncWrite + Unpin + crate::sandbox::relay::Socket {}
impl<S: AsyncRead + AsyncWrite + Unpin + crate::sandbox::relay::Socket> Client for S {}

/// One connection to the proxy's socket. The sandbox's forwarder hands over
/// the agent's own connection on it (`crate::sandbox::forwarder`), which is then
/// served in its place; any other client speaks on the socket itself.
async fn connection(mut client: UnixStream, gate: &dyn Gate, resolver: &Resolver) {
    let deadline = Instant::now() + HANDSHAKE_DEADLINE;
    let first = crate::sandbox::forwarder::first_byte(&client);
    let Ok(Ok((first, handed))) = tokio::time::timeout_at(deadline, first).await else {
        return;
    };
    if first != crate::sandbox::forwarder::HANDOFF {
        // A descriptor that came without the hand-off's byte is closed.
        drop(handed);
        return serve_client(client, first, None, deadline, gate, resolver).await;
    }
    let Ok(Some(asker)) = tokio::time::timeout_at(deadline, preface(&mut client)).await else {
        return;
    };
    drop(client);
    let handed = handed.map(crate::sandbox::forwarder::handed_connection);
    let Some(Ok(mut agent)) = handed else {
        tracing::debug!("an egress hand-off came without a TCP connection");
        return;
    };
    let Ok(Ok(first)) = tokio::time::timeout_at(deadline, agent.read_u8()).await else {
        return;
    };
    let asker = (!asker.is_empty()).then_some(asker);
    serve_client(agent, first, asker, deadline, gate, resolver).await
}

/// Serves one client from its first byte to the end of the relay.
async fn serve_client(
    mut client: impl Client,
    first: u8,
    asker: Option<String>,
    deadline: Instant,
    gate: &dyn Gate,
    resolver: &Resolver,
) {
    let dialect = if first == SOCKS5 { Dialect::Socks5 } else { Dialect::Http };
    let handshake = async {
        match dialect {
            Dialect::Socks5 => socks5_handshake(&mut client).await,
            Dialect::Http => http_handshake(&mut client, first).await,
        }
    };
    let request = match tokio::time::timeout_at(deadline, handshake).await {
        Ok(Ok(request)) => request,
        Ok(Err(refusal)) => {
            tracing::debug!(%refusal, "refused a malformed egress request");
            return refuse(&mut client, dialect, &refusal).await;
        }
        Err(_) => {
            tracing::debug!("an egress client did not finish its request in time");
            return;
        }
    };
    let Request { target, via, mut upstream_prefix } = request;

    let decision = gate.decide(target.clone(), via, asker);
    let Some(verdict) = decide_watching(decision, &mut client, &mut upstream_prefix).await else {
        tracing::debug!(to = %target, %via, "an egress client left before its verdict");
        return;
    };
    if verdict == Verdict::Deny {
        tracing::info!(to = %target, %via, "egress denied");
        return refuse(&mut client, dialect, &Refusal::Denied(target)).await;
    }

    let mut upstream = match connect(resolver, &target).await {
        Ok(upstream) => upstream,
        Err(refusal) => {
            tracing::info!(to = %target, %via, %refusal, "egress allowed but not connected");
            return refuse(&mut client, dialect, &refusal).await;
        }
    };
    tracing::debug!(to = %target, %via, "egress connected");
    let answer = match via {
        Via::HttpConnect => b"HTTP/1.1 200 Connection established\r\n\r\n".to_vec(),
        // The target answers a plain request itself.
        Via::Http => Vec::new(),
        Via::Socks5 => socks5_reply(SocksReply::Succeeded).to_vec(),
    };
    if client.write_all(&answer).await.is_err()
        || upstream.write_all(&upstream_prefix).await.is_err()
    {
        return;
    }
    drop(upstream_prefix);
    let _ = upstream.set_nodelay(true);
    match crate::sandbox::relay::both_ways(&client, &upstream).await {
        Ok((sent, received)) => tracing::debug!(to = %target, sent, received, "egress closed"),
        Err(error) => tracing::debug!(to = %target, %error, "egress relay ended"),
    }
}

/// Waits for the gate's verdict while reading what the client sends
/// meanwhile into `early` (up to [`MAX_EARLY`]), so that a client that
/// hangs up withdraws its question: `None` then.
async fn decide_watching(
    mut decision: BoxFuture<'static, Verdict>,
    client: &mut impl Client,
    early: &mut Vec<u8>,
) -> Option<Verdict> {
    let mut chunk = [0u8; 4096];
    loop {
        tokio::select! {
            // An answer already given wins over a client that has just
            // half-closed.
            biased;
            verdict = &mut decision => return Some(verdict),
            // `read` is cancel-safe: a verdict never loses bytes read.
            read = client.read(&mut chunk), if early.len() < MAX_EARLY => match read {
                Ok(0) | Err(_) => return None,
                Ok(read) => early.extend_from_slice(&chunk[..read]),
            },
        }
    }
}

/// Resolves and connects within [`CONNECT_DEADLINE`], trying each address
/// in turn.
async fn connect(resolver: &Resolver, target: &Target) -> Result<TcpStream, Refusal> {
    let attempt = async {
        let mut last = None;
        for address in resolver.addresses(target).await? {
            match TcpStream::connect(address).await {
                Ok(stream) => {
                    // A relay: pass small writes (an SSH keystroke) on now.
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(error) => last = Some(error),
            }
        }
        let error = last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"));
        Err(Refusal::Unreachable { target: target.clone(), error })
    };
    tokio::time::timeout(CONNECT_DEADLINE, attempt)
        .await
        .unwrap_or_else(|_| Err(Refusal::TimedOut { target: target.clone() }))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::Ipv4Addr;
    use std::path::PathBuf;

    use futures_util::FutureExt;
    use tokio::net::TcpListener;
    use tokio::sync::mpsc;

    use super::handshake::{parse_authority, parse_http};
    use super::*;

    /// Every read in these tests waits at most this long.
    const WITHIN: Duration = Duration::from_secs(5);

    async fn within<F: std::future::Future>(future: F) -> F::Output {
        tokio::time::timeout(WITHIN, future).await.expect("timed out")
    }

    /// How the test gate answers a host:port.
    #[derive(Clone, Copy)]
    enum Answer {
        Now(Verdict),
        /// Never: a person who has not answered yet.
        Never,
    }

    /// Answers by a table (anything else is denied) and reports each ask.
    struct TableGate {
        answers: HashMap<String, Answer>,
        asked: mpsc::UnboundedSender<(Target, Via)>,
        askers: mpsc::UnboundedSender<Option<String>>,
    }

    impl Gate for TableGate {
        fn decide(
            &self,
            target: Target,
            via: Via,
            asker: Option<String>,
        ) -> BoxFuture<'static, Verdict> {
            let _ = self.askers.send(asker);
            let answer = self.answers.get(&target.to_string()).copied();
            let _ = self.asked.send((target, via));
            match answer {
                Some(Answer::Now(verdict)) => futures_util::future::ready(verdict).boxed(),
                Some(Answer::Never) => futures_util::future::pending().boxed(),
                None => futures_util::future::ready(Verdict::Deny).boxed(),
            }
        }
    }

    /// A TCP server on 127.0.0.1 standing for the internet. It reports the
    /// peer of every connection in the order accepted; an echo server
    /// echoes, an HTTP one reports the request head and answers `ok`.
    struct Upstream {
        port: u16,
        accepted: mpsc::UnboundedReceiver<SocketAddr>,
        heads: mpsc::UnboundedReceiver<String>,
    }

    async fn upstream(http: bool) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (accepted_tx, accepted) = mpsc::unbounded_channel();
        let (heads_tx, heads) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (mut stream, peer) = listener.accept().await.unwrap();
                let _ = accepted_tx.send(peer);
                let heads_tx = heads_tx.clone();
                tokio::spawn(async move {
                    if !http {
                        let (mut reader, mut writer) = stream.split();
                        let _ = tokio::io::copy(&mut reader, &mut writer).await;
                        return;
                    }
                    let mut head = Vec::new();
                    while !head.ends_with(b"\r\n\r\n") {
                        let Ok(byte) = stream.read_u8().await else { return };
                        head.push(byte);
                    }
                    let _ = heads_tx.send(String::from_utf8(head).unwrap());
                    let answer =
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
                    let _ = stream.write_all(answer).await;
                });
            }
        });
        Upstream { port, accepted, heads }
    }

    impl Upstream {
        /// Connects to the upstream directly and asserts that this is the
        /// first connection it ever accepted: nothing came through the
        /// proxy before (a connection made earlier is accepted earlier).
        async fn assert_untouched(&mut self) {
            let probe = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
            let first = within(self.accepted.recv()).await.unwrap();
            assert_eq!(first, probe.local_addr().unwrap(), "the proxy reached the target");
        }
    }

    struct Proxy {
        socket: PathBuf,
        asked: mpsc::UnboundedReceiver<(Target, Via)>,
        askers: mpsc::UnboundedReceiver<Option<String>>,
        stop: CancellationToken,
        served: JoinHandle<()>,
        _dir: tempfile::TempDir,
    }

    /// A proxy where `target.test` is 127.0.0.1, answering by `answers`
    /// (host:port → answer).
    fn proxy(answers: &[(String, Answer)]) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("egress.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let (asked_tx, asked) = mpsc::unbounded_channel();
        let (askers_tx, askers) = mpsc::unbounded_channel();
        let answers = answers.iter().cloned().collect();
        let gate = TableGate { answers, asked: asked_tx, askers: askers_tx };
        let resolver =
            Resolver::with_known([("Target.Test".to_owned(), IpAddr::V4(Ipv4Addr::LOCALHOST))]);
        let stop = CancellationToken::new();
        let served = serve(listener, Arc::new(gate), Arc::new(resolver), stop.clone());
        Proxy { socket, asked, askers, stop, served, _dir: dir }
    }

    impl Proxy {
        async fn client(&self) -> UnixStream {
            UnixStream::connect(&self.socket).await.unwrap()
        }
    }

    async fn read_to_end(stream: &mut UnixStream) -> String {
        let mut answer = Vec::new();
        within(stream.read_to_end(&mut answer)).await.unwrap();
        String::from_utf8(answer).unwrap()
    }

    async fn read_exactly(stream: &mut UnixStream, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        within(stream.read_exact(&mut bytes)).await.unwrap();
        bytes
    }

    fn allow(host: &str, port: u16) -> (String, Answer) {
        (format!("{host}:{port}"), Answer::Now(Verdict::Allow))
    }

    #[tokio::test]
    async fn connect_allowed_relays_both_ways_with_early_bytes_first() {
        let upstream = upstream(false).await;
        let mut proxy = proxy(&[allow("target.test", upstream.port)]);
        let mut client = proxy.client().await;
        let request = format!("CONNECT Target.TEST:{} HTTP/1.1\r\n\r\nearly ", upstream.port);
        client.write_all(request.as_bytes()).await.unwrap();
        let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
        assert_eq!(read_exactly(&mut client, established.len()).await, established);
        client.write_all(b"ping").await.unwrap();
        assert_eq!(read_exactly(&mut client, 10).await, b"early ping");
        client.shutdown().await.unwrap();
        assert_eq!(read_to_end(&mut client).await, "");
        let asked = proxy.asked.recv().await.unwrap();
        let target = Target { host: "target.test".to_owned(), port: upstream.port };
        assert_eq!(asked, (target, Via::HttpConnect));
    }

    /// Hands `client`'s peer to the proxy as the sandbox's forwarder does,
    /// naming `asker`; the proxy's own connection then closes.
    async fn hand_over(proxy: &Proxy, asker: &str) -> TcpStream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        let (agent_side, _) = accepted.unwrap();
        let mut socket = proxy.client().await;
        let mut message = vec![crate::sandbox::forwarder::HANDOFF];
        message.extend(asker.bytes());
        message.push(b'\n');
        crate::sandbox::forwarder::send_with(&mut socket, &message, &agent_side).await.unwrap();
        drop(agent_side);
        assert_eq!(read_to_end(&mut socket).await, "", "the socket itself said something");
        client.unwrap()
    }

    #[tokio::test]
    async fn a_handed_over_connection_is_served_in_the_sockets_place() {
        let upstream = upstream(false).await;
        let mut proxy = proxy(&[allow("target.test", upstream.port)]);
        let mut client = hand_over(&proxy, "curl (pid 7)").await;
        let request = format!("CONNECT target.test:{} HTTP/1.1\r\n\r\n", upstream.port);
        client.write_all(request.as_bytes()).await.unwrap();
        let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
        let mut answer = vec![0u8; established.len()];
        within(client.read_exact(&mut answer)).await.unwrap();
        assert_eq!(answer, established);
        client.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        within(client.read_exact(&mut echoed)).await.unwrap();
        assert_eq!(&echoed, b"ping");
        assert_eq!(proxy.askers.recv().await.unwrap().as_deref(), Some("curl (pid 7)"));
        // An empty line is a forwarder that could not tell.
        let mut unnamed = hand_over(&proxy, "").await;
        unnamed.write_all(request.as_bytes()).await.unwrap();
        within(unnamed.read_exact(&mut answer)).await.unwrap();
        assert_eq!(proxy.askers.recv().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_hand_off_without_a_tcp_connection_is_dropped_unasked() {
        let mut proxy = proxy(&[]);
        // The hand-off's byte with no descriptor, then with a unix socket.
        let mut bare = proxy.client().await;
        bare.write_all(&[crate::sandbox::forwarder::HANDOFF, b'\n']).await.unwrap();
        assert_eq!(read_to_end(&mut bare).await, "");
        let (inner, _outer) = UnixStream::pair().unwrap();
        let mut socket = proxy.client().await;
        let message = [crate::sandbox::forwarder::HANDOFF, b'\n'];
        crate::sandbox::forwarder::send_with(&mut socket, &message, &inner).await.unwrap();
        assert_eq!(read_to_end(&mut socket).await, "");
        assert!(proxy.asked.try_recv().is_err(), "the gate was asked");
    }

    #[tokio::test]
    async fn connect_denied_answers_403_and_never_reaches_the_target() {
        let mut upstream = upstream(false).await;
        let proxy = proxy(&[]);
        let mut client = proxy.client().await;
        let request = format!("CONNECT target.test:{} HTTP/1.1\r\n\r\n", upstream.port);
        client.write_all(request.as_bytes()).await.unwrap();
        let answer = read_to_end(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        let refused =
            format!("Shard's sandbox refused a connection to target.test:{}", upstream.port);
        assert!(answer.contains(&refused), "{answer}");
        upstream.assert_untouched().await;
    }

    #[tokio::test]
    async fn an_absolute_get_reaches_the_target_in_origin_form_alone() {
        let mut upstream = upstream(true).await;
        let mut proxy = proxy(&[allow("target.test", upstream.port)]);
        let mut client = proxy.client().await;
        let request = format!(
            "GET http://target.test:{port}/path?q=1#part HTTP/1.1\r\nHost: elsewhere.example\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive\r\nUser-Agent: test\r\n\r\n",
            port = upstream.port
        );
        client.write_all(request.as_bytes()).await.unwrap();
        let answer = read_to_end(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("ok"), "{answer}");
        let head = within(upstream.heads.recv()).await.unwrap();
        let expected = format!(
            "GET /path?q=1 HTTP/1.1\r\nHost: target.test:{}\r\nUser-Agent: test\r\nConnection: close\r\n\r\n",
            upstream.port
        );
        assert_eq!(head, expected);
        assert_eq!(proxy.asked.recv().await.unwrap().1, Via::Http);
    }

    #[tokio::test]
    async fn requests_that_are_not_plain_proxy_requests_are_answered_400_unasked() {
        let upstream = upstream(true).await;
        let mut proxy = proxy(&[allow("target.test", upstream.port)]);
        for request in [
            format!("GET https://target.test:{}/ HTTP/1.1\r\n\r\n", upstream.port),
            "GET /index.html HTTP/1.1\r\nHost: target.test\r\n\r\n".to_owned(),
            "CONNECT target.test HTTP/1.1\r\n\r\n".to_owned(),
            "CONNECT 2130706433:80 HTTP/1.1\r\n\r\n".to_owned(),
        ] {
            let mut client = proxy.client().await;
            client.write_all(request.as_bytes()).await.unwrap();
            let answer = read_to_end(&mut client).await;
            assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{request}: {answer}");
        }
        proxy.stop.cancel();
        within(&mut proxy.served).await.unwrap();
        assert!(proxy.asked.try_recv().is_err(), "the gate was asked");
    }

    #[tokio::test]
    async fn an_oversized_head_is_answered_431() {
        let proxy = proxy(&[]);
        let mut client = proxy.client().await;
        let mut request = b"GET http://target.test/ HTTP/1.1\r\nX-Big: ".to_vec();
        request.resize(MAX_HEAD + 1024, b'a');
        client.write_all(&request).await.unwrap();
        let answer = read_to_end(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    }

    /// A SOCKS5 CONNECT request for `address` (type byte first) and `port`.
    async fn socks5(proxy: &Proxy, address: &[u8], port: u16) -> (UnixStream, Vec<u8>) {
        let mut client = proxy.client().await;
        client.write_all(&[SOCKS5, 2, 0x02, 0x00]).await.unwrap();
        assert_eq!(read_exactly(&mut client, 2).await, [SOCKS5, 0x00]);
        let mut request = vec![SOCKS5, 0x01, 0x00];
        request.extend_from_slice(address);
        request.extend_from_slice(&port.to_be_bytes());
        client.write_all(&request).await.unwrap();
        let reply = read_exactly(&mut client, 10).await;
        (client, reply)
    }

    fn domain(name: &str) -> Vec<u8> {
        let mut address = vec![0x03, u8::try_from(name.len()).unwrap()];
        address.extend_from_slice(name.as_bytes());
        address
    }

    #[tokio::test]
    async fn socks5_connects_a_domain_and_an_ipv4_address() {
        let upstream = upstream(false).await;
        let answers = [allow("target.test", upstream.port), allow("127.0.0.1", upstream.port)];
        let mut proxy = proxy(&answers);
        for address in [domain("target.test"), vec![0x01, 127, 0, 0, 1]] {
            let (mut client, reply) = socks5(&proxy, &address, upstream.port).await;
            assert_eq!(reply, [SOCKS5, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
            client.write_all(b"ping").await.unwrap();
            assert_eq!(read_exactly(&mut client, 4).await, b"ping");
        }
        let hosts = [proxy.asked.recv().await.unwrap(), proxy.asked.recv().await.unwrap()];
        let hosts = hosts.map(|(target, via)| (target.host, via));
        let expected =
            [("target.test".to_owned(), Via::Socks5), ("127.0.0.1".to_owned(), Via::Socks5)];
        assert_eq!(hosts, expected);
    }

    #[tokio::test]
    async fn socks5_refusals_carry_rfc_1928_codes() {
        let mut upstream = upstream(false).await;
        let proxy = proxy(&[]);
        for address in [domain("target.test"), vec![0x01, 127, 0, 0, 1]] {
            let (_client, reply) = socks5(&proxy, &address, upstream.port).await;
            assert_eq!(reply[..2], [SOCKS5, 0x02], "not allowed by the ruleset");
        }
        upstream.assert_untouched().await;

        let mut client = proxy.client().await;
        client.write_all(&[SOCKS5, 1, 0x02]).await.unwrap();
        assert_eq!(read_exactly(&mut client, 2).await, [SOCKS5, 0xFF], "no acceptable method");

        let mut client = proxy.client().await;
        client
            .write_all(&[SOCKS5, 1, 0x00, SOCKS5, 0x02, 0x00, 0x01, 127, 0, 0, 1, 0, 80])
            .await
            .unwrap();
        let reply = read_exactly(&mut client, 12).await;
        assert_eq!(reply[..4], [SOCKS5, 0x00, SOCKS5, 0x07], "BIND is not supported");
    }

    #[tokio::test]
    async fn a_connection_refused_by_the_target_is_reported_as_such() {
        // A port nothing listens on: bound, then closed.
        let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
        let proxy = proxy(&[allow("target.test", port)]);
        let (_client, reply) = socks5(&proxy, &domain("target.test"), port).await;
        assert_eq!(reply[..2], [SOCKS5, 0x05]);
        let mut client = proxy.client().await;
        client
            .write_all(format!("CONNECT target.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let answer = read_to_end(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{answer}");
    }

    #[tokio::test]
    async fn a_name_that_dns_resolves_to_this_machine_is_refused() {
        let mut upstream = upstream(false).await;
        let proxy = proxy(&[allow("localhost", upstream.port)]);
        let mut client = proxy.client().await;
        let request = format!("CONNECT localhost:{} HTTP/1.1\r\n\r\n", upstream.port);
        client.write_all(request.as_bytes()).await.unwrap();
        let answer = read_to_end(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert!(answer.contains("resolves only to this machine's own addresses"), "{answer}");
        let (_client, reply) = socks5(&proxy, &domain("localhost"), upstream.port).await;
        assert_eq!(reply[..2], [SOCKS5, 0x02]);
        upstream.assert_untouched().await;
    }

    #[tokio::test]
    async fn the_connection_past_the_limit_is_closed_and_stop_ends_the_rest() {
        let mut proxy = proxy(&[("held.test:443".to_owned(), Answer::Never)]);
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut client = proxy.client().await;
            client.write_all(b"CONNECT held.test:443 HTTP/1.1\r\n\r\n").await.unwrap();
            held.push(client);
        }
        // Every held connection has its slot once the gate has its ask.
        for _ in 0..MAX_CONNECTIONS {
            within(proxy.asked.recv()).await.unwrap();
        }
        let mut over = proxy.client().await;
        assert_eq!(read_to_end(&mut over).await, "", "the connection past the limit was served");

        proxy.stop.cancel();
        within(&mut proxy.served).await.unwrap();
        for client in &mut held {
            assert_eq!(read_to_end(client).await, "");
        }
    }

    #[test]
    fn authorities_parse_as_the_gate_sees_them() {
        let target = |host: &str, port| Target { host: host.to_owned(), port };
        assert_eq!(parse_authority("Example.COM:443", None).unwrap(), target("example.com", 443));
        assert_eq!(parse_authority("[::1]:8443", None).unwrap(), target("::1", 8443));
        assert_eq!(parse_authority("[0:0::1]", Some(80)).unwrap(), target("::1", 80));
        assert_eq!(parse_authority("10.0.0.1", Some(80)).unwrap(), target("10.0.0.1", 80));
        assert_eq!(target("::1", 443).to_string(), "[::1]:443");
        for bad in [
            "example.com",
            "example.com:0",
            "example.com:99999",
            "user:pass@example.com:80",
            "::1:443",
            "[example.com]:443",
            "127.1:80",
            "0x7f.1:80",
            "exa mple.com:80",
            ":80",
        ] {
            assert!(parse_authority(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_plain_request_is_rewritten_with_its_body_bytes() {
        let request =
            b"POST http://Example.com?x=1 HTTP/1.0\r\nContent-Length: 4\r\nKeep-Alive: 5\r\n\r\nbody";
        let parsed = parse_http(request).unwrap().unwrap();
        assert_eq!(parsed.target, Target { host: "example.com".to_owned(), port: 80 });
        let head = String::from_utf8(parsed.upstream_prefix).unwrap();
        assert_eq!(
            head,
            "POST /?x=1 HTTP/1.0\r\nHost: example.com\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody"
        );
        assert!(parse_http(b"GET http://example.com/ HTTP/1.1\r\nHost: x").unwrap().is_none());
    }

    /// A client that sends one byte per read.
    struct Trickle<'a>(&'a [u8]);

    impl AsyncRead for Trickle<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            if let Some((first, rest)) = self.0.split_first() {
                buf.put_slice(&[*first]);
                self.0 = rest;
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_head_is_found_however_it_is_cut() {
        for request in [
            &b"CONNECT a.test:443 HTTP/1.1\r\n\r\nhello"[..],
            b"CONNECT a.test:1 HTTP/1.0\n\nhello",
        ] {
            let (first, rest) = request.split_first().unwrap();
            let mut client = Trickle(rest);
            let parsed = http_handshake(&mut client, *first).await.unwrap();
            assert_eq!(parsed.target.host, "a.test");
            // Read up to the blank line and no further.
            assert_eq!(client.0, b"hello");
        }
        let refused =
            http_handshake(&mut Trickle(b"\nCONNECT a.test:443 HTTP/1.1\r\n\r\n"), b'\r').await;
        assert!(matches!(refused, Err(Refusal::BadRequest(_))));
    }

    #[test]
    fn own_machine_addresses_are_recognised() {
        for own in
            ["127.0.0.2", "::1", "0.0.0.0", "::", "169.254.1.1", "fe80::1", "::ffff:127.0.0.1"]
        {
            assert!(is_own_machine(own.parse().unwrap()), "{own}");
        }
        for outside in ["10.0.0.1", "93.184.216.34", "2606:4700::1111"] {
            assert!(!is_own_machine(outside.parse().unwrap()), "{outside}");
        }
    }
}
