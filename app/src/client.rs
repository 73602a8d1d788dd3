//! The browser side of the connection (hydrate only): enroll when opened with
//! `#enroll=CODE` (then drop the code from the address bar), get a ticket from
//! `/bootstrap`, open `/ws` with it, keep the agent list live, re-attach the
//! selected agent after every reconnect (its `sync` brings the transcript and
//! any open question back), and retry a lost connection with backoff 1 s,
//! 2 s, 4 s … 30 s (§2.2). The wait ends early when a retry is likelier to
//! work: the browser is back `online`, the tab is shown again
//! (`visibilitychange`, `pageshow`), or the user asks ([`reconnect_now`]).
//!
//! Enrollment also hands out a browser secret, kept in this origin's
//! localStorage and sent to `/bootstrap` beside the cookie: the cookie also
//! goes to every other port of the host, the secret to this page only. The
//! same two ask `/pair` for a link that enrolls another device.

use futures::{SinkExt, StreamExt};
use gloo_net::http::Request as Http;
use gloo_net::websocket::Message;
use gloo_net::websocket::futures::WebSocket;
use leptos::prelude::Set;
use shard_protocol::web::{
    BROWSER_SECRET_HEADER, Bootstrap, EnrollAnswer, EnrollRequest, PairAnswer,
};

use crate::link::{Connection, on_screen};
use crate::pairing::Pairing;
use crate::reducer::{Greeted, handle};
use crate::state::ClientState;

const MAX_BACKOFF_SECONDS: u32 = 30;
/// Where the browser secret is kept (localStorage: per origin, so per
/// daemon, and across tabs and restarts).
const BROWSER_SECRET: &str = "shard.browser_secret";

fn local_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

/// `request` with this browser's secret, if it keeps one.
pub(crate) fn with_secret(
    request: gloo_net::http::RequestBuilder,
) -> gloo_net::http::RequestBuilder {
    match local_storage().and_then(|storage| storage.get_item(BROWSER_SECRET).ok().flatten()) {
        Some(secret) => request.header(BROWSER_SECRET_HEADER, &secret),
        None => request,
    }
}

/// POSTs JSON `body` to one of the daemon's routes with this browser's
/// secret; a refusal is said with its status and the daemon's words.
pub(crate) async fn post_json(path: &str, body: &str) -> Result<(), String> {
    let request = with_secret(Http::post(path))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .map_err(|_| "The request could not be made.".to_owned())?;
    let response = request.send().await.map_err(|_| "The daemon cannot be reached.".to_owned())?;
    if !(200..300).contains(&response.status()) {
        let said = response.text().await.unwrap_or_default();
        return Err(format!("The daemon refused ({}): {said}", response.status()));
    }
    Ok(())
}

/// `POST /pair`: a one-time enrollment link for another device, or the
/// status that refused it (0: no answer).
async fn ask_for_pairing() -> Result<PairAnswer, u16> {
    let request = with_secret(Http::post("/pair")).header("content-type", "application/json");
    let response = request.body("{}").map_err(|_| 0u16)?.send().await.map_err(|_| 0u16)?;
    if response.status() != 200 {
        return Err(response.status());
    }
    response.json::<PairAnswer>().await.map_err(|_| 0)
}

/// Shows a new pairing link in the dialog, then counts its time down each
/// second while it is on show.
pub async fn pair(pairing: Pairing) {
    let url = match ask_for_pairing().await {
        Ok(answer) => pairing.show(answer, crate::guard::now_ms()),
        Err(status) => return pairing.failed(status),
    };
    while pairing.tick(&url, crate::guard::now_ms()) {
        gloo_timers::future::TimeoutFuture::new(1000).await;
    }
}

/// Puts `text` on the clipboard, where the browser allows it (a secure
/// context: loopback or https); elsewhere the caller's selection stands.
pub fn copy(text: &str) {
    let Some(window) = web_sys::window() else { return };
    if window.is_secure_context() {
        let _ = window.navigator().clipboard().write_text(text);
    }
}

enum Ended {
    /// The browser has no valid session: enrollment is needed.
    NotEnrolled,
    /// The connection failed or dropped; `connected` if it had worked.
    Dropped { connected: bool },
    /// The daemon speaks another protocol version.
    Mismatch,
}

/// The code from `#enroll=…`, removed from the address bar at once so it is
/// neither bookmarked nor left in history.
fn take_enroll_code() -> Option<String> {
    let window = web_sys::window()?;
    let location = window.location();
    let hash = location.hash().ok()?;
    let code = hash.strip_prefix("#enroll=")?.to_owned();
    let clean = format!("{}{}", location.pathname().ok()?, location.search().ok()?);
    if let Ok(history) = window.history() {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&clean));
    }
    (!code.is_empty()).then_some(code)
}

async fn enroll(state: &ClientState, code: String) {
    state.link.connection.set(Connection::Enrolling);
    let body = EnrollRequest { code };
    let enrolled = match Http::post("/enroll").json(&body) {
        Ok(request) => request.send().await,
        Err(error) => Err(error),
    };
    let status = enrolled.as_ref().map(|response| response.status());
    match status {
        Ok(200) => {
            let answer = match enrolled {
                Ok(response) => response.json::<EnrollAnswer>().await.ok(),
                Err(_) => None,
            };
            let kept = answer.zip(local_storage()).is_some_and(|(answer, storage)| {
                storage.set_item(BROWSER_SECRET, &answer.browser_secret).is_ok()
            });
            let notice = if kept {
                "This browser is now enrolled."
            } else {
                "Enrolled, but this browser would not keep the enrollment: allow this site's storage and open a new link."
            };
            state.link.notice.set(Some(notice.to_owned()));
        }
        Ok(429) => state
            .link
            .notice
            .set(Some("Too many tries; wait a minute and open a new link.".to_owned())),
        _ => state.link.notice.set(Some(
            "That enrollment link is invalid, used or expired. Run `shard enroll` for a new one."
                .to_owned(),
        )),
    }
}

/// Resolves at the next `hashchange` (an enrollment link opened in this tab).
async fn hash_changed() {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let Some(window) = web_sys::window() else { return std::future::pending().await };
    let (fire, fired) = futures::channel::oneshot::channel::<()>();
    let fire = std::cell::Cell::new(Some(fire));
    let listener = Closure::<dyn FnMut()>::new(move || {
        if let Some(fire) = fire.take() {
            let _ = fire.send(());
        }
    });
    let callback = listener.as_ref().unchecked_ref();
    if window.add_event_listener_with_callback("hashchange", callback).is_err() {
        return std::future::pending().await;
    }
    let _ = fired.await;
    let _ = window.remove_event_listener_with_callback("hashchange", callback);
}

thread_local! {
    /// Ends the wait before the next try, while one is under way.
    static WAKE: std::cell::RefCell<Option<futures::channel::oneshot::Sender<()>>> =
        const { std::cell::RefCell::new(None) };
}

/// Tries to connect at once rather than at the end of the backoff.
pub fn reconnect_now() {
    WAKE.with(|wake| {
        if let Some(wake) = wake.borrow_mut().take() {
            let _ = wake.send(());
        }
    });
}

/// Waits `milliseconds`, or less if [`reconnect_now`] is called meanwhile.
async fn pause(milliseconds: u32) {
    let (wake, woken) = futures::channel::oneshot::channel();
    WAKE.with(|slot| *slot.borrow_mut() = Some(wake));
    let timer = gloo_timers::future::TimeoutFuture::new(milliseconds);
    futures::future::select(timer, woken).await;
    WAKE.with(|slot| slot.borrow_mut().take());
}

/// What tells the page a retry would now work: the network is back, or the
/// tab is shown again (a phone's browser woken, a tab restored from the
/// back-forward cache). Listened to for the page's life.
fn wake_on_return() {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let Some(window) = web_sys::window() else { return };
    let wake = Closure::<dyn FnMut()>::new(|| {
        if on_screen() {
            reconnect_now();
        }
    });
    let callback = wake.as_ref().unchecked_ref();
    for event in ["online", "pageshow"] {
        let _ = window.add_event_listener_with_callback(event, callback);
    }
    if let Some(document) = window.document() {
        let _ = document.add_event_listener_with_callback("visibilitychange", callback);
    }
    wake.forget();
}

/// The page opens on the agent its address names (`#agent=ID`: a link, a
/// reload, a window the service worker opened for a notification), and a
/// notification clicked while it is open sends it there (its
/// `shard.open:ID` message, public/sw.js).
pub fn open_from_notifications(state: &ClientState) {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let Some(window) = web_sys::window() else { return };
    // The address names an agent (crate::address): it is the one on screen.
    let asked = window.location().hash().ok().and_then(|hash| crate::address::agent_in(&hash));
    if let Some(agent_id) = asked {
        state.select(Some(agent_id));
    }
    if !window.is_secure_context() {
        return;
    }
    let state = state.clone();
    let opened =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
            let said = event.data().as_string();
            if let Some(agent_id) =
                said.as_deref().and_then(|said| said.strip_prefix("shard.open:"))
            {
                state.select(Some(agent_id.to_owned()));
            }
        });
    let workers = window.navigator().service_worker();
    let _ = workers.add_event_listener_with_callback("message", opened.as_ref().unchecked_ref());
    opened.forget();
}

/// Tells the daemon each time the tab is shown or hidden (and
/// [`crate::reducer`] tells it once per connection).
fn report_presence(state: &ClientState) {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let Some(document) = web_sys::window().and_then(|window| window.document()) else { return };
    let link = state.link;
    let changed = Closure::<dyn FnMut()>::new(move || link.presence(on_screen()));
    let _ = document
        .add_event_listener_with_callback("visibilitychange", changed.as_ref().unchecked_ref());
    changed.forget();
}

pub async fn run(state: ClientState) {
    wake_on_return();
    report_presence(&state);
    loop {
        if let Some(code) = take_enroll_code() {
            enroll(&state, code).await;
        }
        let mut backoff = 1;
        loop {
            state.link.connection.set(Connection::Connecting);
            match connect(&state).await {
                Ended::NotEnrolled => {
                    state.link.connection.set(Connection::NotEnrolled);
                    break;
                }
                Ended::Mismatch => {
                    // Reconnecting cannot help; a reload (of a new page) can.
                    state.link.disconnect();
                    return;
                }
                Ended::Dropped { connected } => {
                    state.link.disconnect();
                    // Answers to what was sent on that connection never come.
                    state.connection_lost();
                    if connected {
                        backoff = 1;
                    }
                    state.link.connection.set(Connection::Retrying(backoff));
                    pause(backoff * 1000).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF_SECONDS);
                }
            }
        }
        // Not enrolled: wait for an enrollment link opened in this tab.
        hash_changed().await;
    }
}

async fn connect(state: &ClientState) -> Ended {
    let dropped = Ended::Dropped { connected: false };
    let response = match with_secret(Http::post("/bootstrap")).send().await {
        Ok(response) => response,
        Err(_) => return dropped,
    };
    if response.status() == 401 {
        return Ended::NotEnrolled;
    }
    if response.status() != 200 {
        return dropped;
    }
    let Ok(Bootstrap { ticket, .. }) = response.json::<Bootstrap>().await else { return dropped };
    let Some(location) = web_sys::window().map(|window| window.location()) else { return dropped };
    let (Ok(protocol), Ok(host)) = (location.protocol(), location.host()) else { return dropped };
    let scheme = if protocol == "https:" { "wss" } else { "ws" };
    let url = format!("{scheme}://{host}/ws");
    let protocols = [
        shard_protocol::WS_SUBPROTOCOL.to_owned(),
        format!("{}{ticket}", shard_protocol::WS_TICKET_PREFIX),
    ];
    let Ok(socket) = WebSocket::open_with_protocols(&url, &protocols) else { return dropped };
    let (mut writer, mut reader) = socket.split();
    let (outgoing, mut queue) = futures::channel::mpsc::unbounded::<String>();
    state.link.connect(Box::new(move |text| {
        let _ = outgoing.unbounded_send(text);
    }));
    leptos::task::spawn_local(async move {
        while let Some(text) = queue.next().await {
            if writer.send(Message::Text(text)).await.is_err() {
                break;
            }
        }
    });
    let mut connected = false;
    while let Some(message) = reader.next().await {
        match message {
            Ok(Message::Text(text)) => match handle(state, &text) {
                Greeted::Yes => connected = true,
                Greeted::Mismatch => return Ended::Mismatch,
                Greeted::No => {}
            },
            Ok(Message::Bytes(_)) => {}
            Err(_) => break,
        }
    }
    Ended::Dropped { connected }
}
