//! Delivering pushes (RFC 8030): each encrypted to its browser's keys (RFC
//! 8291, `aes128gcm`) and signed with the daemon's VAPID key (RFC 8292) by
//! the `web-push-native` crate, then posted by the daemon's own HTTP client.
//!
//! Each browser session has its own small queue and task, so its pushes
//! keep their order (a question's end after the question) and a slow push
//! service holds up no other browser. Every queue is bounded and never
//! waited on: a full one drops the push. A push is retried with backoff
//! while its service is busy or down; a `404` or `410` means the
//! subscription is gone, and it is forgotten.
//!
//! The client follows no redirect, takes no proxy from the environment (a
//! proxy would resolve the push service's name itself, past the check
//! below) and, unless `--insecure-push-endpoints`, connects only to public
//! addresses: a name that resolves to loopback or a private network is
//! refused at every connection, not only when it was subscribed
//! (docs/SECURITY.md, "SSRF through Web Push").

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use tokio::sync::mpsc;
use web_push_native::jwt_simple::algorithms::ES256KeyPair;
use web_push_native::vapid::VapidSignature;

use crate::web::auth::{Auth, PushSubscription};

/// Pushes queued per browser session.
const SESSION_QUEUE: usize = 16;
/// A session's task ends once idle this long (the next push starts another).
const IDLE: Duration = Duration::from_secs(60);
/// The whole of one attempt: connect, send, read the status.
const ATTEMPT: Duration = Duration::from_secs(15);
/// Attempts per push, and the first wait between two (doubling each time).
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest `Retry-After` honoured; a push later than that is stale.
const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// How long a push's VAPID signature holds (RFC 8292 allows up to a day).
const SIGNATURE_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// One push for one browser.
pub struct Outgoing {
    pub push: PushSubscription,
    /// The notification's JSON, encrypted on the way out.
    pub payload: Vec<u8>,
    pub topic: Option<String>,
    /// Seconds the push service keeps it for an offline browser.
    pub ttl: u32,
    pub urgent: bool,
}

/// What the daemon signs and sends with.
#[derive(Clone)]
pub struct Signer {
    pub key: Arc<ES256KeyPair>,
    /// The VAPID `sub` claim: how a push service reaches the sender.
    pub contact: String,
}

/// Hands each session's pushes to its task.
#[derive(Clone)]
pub struct Sender {
    shared: Arc<Shared>,
}

struct Shared {
    client: reqwest::Client,
    signer: Signer,
    auth: Arc<Auth>,
    insecure: bool,
    sessions: Mutex<HashMap<String, mpsc::Sender<Outgoing>>>,
}

impl Sender {
    /// `known`: names found without asking DNS (`--push-resolve`, for
    /// tests), judged as DNS's answers are.
    pub fn new(
        signer: Signer,
        auth: Arc<Auth>,
        insecure: bool,
        known: &[(String, IpAddr)],
    ) -> anyhow::Result<Self> {
        let known = known.iter().cloned().collect();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // `HTTPS_PROXY` and the like would be asked for any name and
            // resolve it themselves, where `PublicOnly` cannot judge it.
            .no_proxy()
            .timeout(ATTEMPT)
            .connect_timeout(ATTEMPT)
            .dns_resolver(Arc::new(PublicOnly { insecure, known }))
            .user_agent(concat!("shard/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let sessions = Mutex::default();
        Ok(Self { shared: Arc::new(Shared { client, signer, auth, insecure, sessions }) })
    }

    /// Queues a push for `session_id`; false when its queue is full.
    pub fn send(&self, session_id: &str, outgoing: Outgoing) -> bool {
        let mut sessions = self.shared.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let outgoing = match sessions.get(session_id) {
            None => outgoing,
            Some(queue) => match queue.try_send(outgoing) {
                Ok(()) => return true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!("a browser's push queue is full; a push is dropped");
                    return false;
                }
                // Its task is gone: start another.
                Err(mpsc::error::TrySendError::Closed(outgoing)) => outgoing,
            },
        };
        let (queue, pushes) = mpsc::channel(SESSION_QUEUE);
        let _ = queue.try_send(outgoing);
        sessions.insert(session_id.to_owned(), queue);
        tokio::spawn(deliver_all(self.shared.clone(), session_id.to_owned(), pushes));
        true
    }
}

/// One session's task: its pushes in order, until idle.
async fn deliver_all(
    shared: Arc<Shared>,
    session_id: String,
    mut pushes: mpsc::Receiver<Outgoing>,
) {
    loop {
        let outgoing = match tokio::time::timeout(IDLE, pushes.recv()).await {
            Ok(Some(outgoing)) => outgoing,
            Ok(None) => return,
            Err(_idle) => {
                // Under the lock `Sender::send` queues with: nothing can be
                // queued between this last look and the entry's removal.
                let mut sessions = shared.sessions.lock().unwrap_or_else(PoisonError::into_inner);
                match pushes.try_recv() {
                    Ok(outgoing) => outgoing,
                    Err(_) => {
                        sessions.remove(&session_id);
                        return;
                    }
                }
            }
        };
        // Queued behind a push the service called gone, or a browser that
        // unsubscribed or was logged out since: not sent.
        let current = shared.auth.subscription(&session_id);
        if current.is_none_or(|push| push.endpoint != outgoing.push.endpoint) {
            tracing::debug!("a push for a subscription no longer held is dropped");
            continue;
        }
        if deliver(&shared, &outgoing).await == Delivery::Gone {
            match shared.auth.subscription_gone(&session_id, &outgoing.push.endpoint) {
                Ok(true) => tracing::info!(
                    service = %outgoing.push.service(),
                    "the push service says a subscription is gone; forgotten"
                ),
                Ok(false) => {}
                Err(error) => tracing::error!(%error, "cannot forget a push subscription"),
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Delivery {
    Delivered,
    /// The subscription is no more (404, 410).
    Gone,
    /// Given up: refused for good, or still failing after every attempt.
    Failed,
}

async fn deliver(shared: &Shared, outgoing: &Outgoing) -> Delivery {
    let service = outgoing.push.service();
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let wait = match attempt_once(shared, outgoing).await {
            Attempt::Done(delivery) => return delivery,
            Attempt::Retry(after) => after.unwrap_or(backoff).min(LONGEST_WAIT),
        };
        if attempt < ATTEMPTS {
            tracing::debug!(%service, attempt, ?wait, "push not taken; trying again");
            tokio::time::sleep(wait).await;
            backoff *= 2;
        }
    }
    tracing::warn!(%service, "push not delivered after {ATTEMPTS} attempts");
    Delivery::Failed
}

enum Attempt {
    Done(Delivery),
    /// Try again, after the service's `Retry-After` if it gave one.
    Retry(Option<Duration>),
}

async fn attempt_once(shared: &Shared, outgoing: &Outgoing) -> Attempt {
    let service = outgoing.push.service();
    let request = match request(shared, outgoing) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(%service, %error, "cannot make a push");
            return Attempt::Done(Delivery::Failed);
        }
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => {
            // Without the URL: it is the subscription's capability.
            tracing::debug!(%service, error = %error.without_url(), "push service unreachable");
            return Attempt::Retry(None);
        }
    };
    let status = response.status();
    if status.is_success() {
        return Attempt::Done(Delivery::Delivered);
    }
    match status.as_u16() {
        404 | 410 => Attempt::Done(Delivery::Gone),
        429 | 500..=599 => {
            let after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            Attempt::Retry(after)
        }
        _ => {
            tracing::warn!(%service, %status, "the push service refused a push");
            Attempt::Done(Delivery::Failed)
        }
    }
}

/// The encrypted, signed request for one push.
fn request(shared: &Shared, outgoing: &Outgoing) -> anyhow::Result<reqwest::RequestBuilder> {
    let push = &outgoing.push;
    // Checked when subscribed; again here, for an address written in the
    // URL never goes through the resolver below.
    super::check_endpoint(&push.endpoint, shared.insecure)?;
    let (browser_key, secret) = super::subscriber_keys(&push.p256dh, &push.auth)?;
    let endpoint: axum::http::Uri = push.endpoint.parse()?;
    let signature = VapidSignature::sign(
        &endpoint,
        SIGNATURE_LIFETIME,
        &shared.signer.contact,
        &shared.signer.key,
    )
    .map_err(|error| anyhow::anyhow!("cannot sign: {error}"))?;
    let body = web_push_native::encrypt(outgoing.payload.clone(), &browser_key, &secret)
        .map_err(|error| anyhow::anyhow!("cannot encrypt: {error}"))?;
    let mut request = shared
        .client
        .post(push.endpoint.as_str())
        .header(reqwest::header::AUTHORIZATION, signature.to_string())
        .header("TTL", outgoing.ttl.to_string())
        .header("Urgency", if outgoing.urgent { "high" } else { "normal" });
    if let Some(topic) = &outgoing.topic {
        request = request.header("Topic", topic.as_str());
    }
    Ok(request
        .header(reqwest::header::CONTENT_ENCODING, "aes128gcm")
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .body(body))
}

/// Resolves names to public addresses only (unless `insecure`): a push
/// service's name pointed at this machine or its network is refused.
struct PublicOnly {
    insecure: bool,
    /// Names found here rather than by DNS (`--push-resolve`).
    known: HashMap<String, IpAddr>,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let insecure = self.insecure;
        let known = self.known.get(name.as_str()).copied();
        Box::pin(async move {
            let found: Vec<SocketAddr> = match known {
                Some(ip) => vec![SocketAddr::new(ip, 0)],
                None => tokio::net::lookup_host((name.as_str(), 0)).await?.collect(),
            };
            let public: Vec<SocketAddr> = found
                .into_iter()
                .filter(|address| insecure || super::address::public(address.ip()).is_ok())
                .collect();
            if public.is_empty() {
                // The host only: the rest of the endpoint is a capability.
                tracing::warn!(
                    host = name.as_str(),
                    "a push service's name resolves to no public address; not sent"
                );
                let refused: Box<dyn std::error::Error + Send + Sync> =
                    format!("`{}` resolves to no public address", name.as_str()).into();
                return Err(refused);
            }
            let addresses: Addrs = Box::new(public.into_iter());
            Ok(addresses)
        })
    }
}
