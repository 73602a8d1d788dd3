//! "Notifications": the dialog that turns on this tab's notifications,
//! subscribes this browser to the daemon's Web Push (docs/NOTIFICATIONS.md)
//! after an explicit click, and chooses what it hears of: questions, failed
//! turns, and agents left out.
//! Its code loads the first time it opens (`push_dialog`); the first load
//! carries only its button and its open state.

use leptos::prelude::*;
use shard_protocol::types::AgentInfo;

use super::state;

#[component]
pub fn PushDialog() -> impl IntoView {
    let wanted = state().push.wanted;
    super::deferred(move || wanted.get(), push_dialog)
}

/// What the daemon says of this browser's subscription (`GET /push/choices`).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
struct Status {
    subscribed: bool,
    service: Option<String>,
    choices: Choices,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Choices {
    questions: bool,
    errors: bool,
    #[serde(default)]
    muted: Vec<String>,
}

impl Default for Choices {
    fn default() -> Self {
        Self { questions: true, errors: true, muted: Vec::new() }
    }
}

/// The device's part of the dialog: what the daemon says of this
/// browser's subscription, whether a request is under way (the controls
/// wait for it), and what to tell the user.
#[derive(Clone, Copy)]
struct Device {
    status: RwSignal<Status>,
    message: RwSignal<Option<String>>,
    busy: RwSignal<bool>,
}

impl Device {
    /// Does `job`, the controls disabled meanwhile; then says what came of
    /// it, if anything.
    fn run(self, job: web::Job) {
        let Self { status, message, busy } = self;
        busy.set(true);
        message.set(None);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            let said = web::run(job, status).await;
            message.set(said);
            busy.set(false);
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (job, status);
    }
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(push_dialog, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn push_dialog() -> Result<AnyView, super::Unloaded> {
    let page = state();
    let panel = page.push;
    let device = Device {
        status: RwSignal::new(Status::default()),
        message: RwSignal::new(None::<String>),
        busy: RwSignal::new(false),
    };
    #[cfg(feature = "hydrate")]
    {
        request_animation_frame(move || panel.show_modal());
        leptos::task::spawn_local(web::refresh(device.status, device.message));
    }
    Ok(view! {
        <dialog class="dialog push" aria-labelledby="push-title" node_ref=panel.dialog>
            <h2 id="push-title">"Notifications"</h2>
            <InThisTab tab_on=page.questions.notify message=device.message/>
            <OnThisDevice device=device/>
            <WhatToSend device=device agents=page.roster.agents/>
            <div class="pair-actions">
                <button on:click=move |_| crate::dialog::close(panel.dialog)>"Close"</button>
            </div>
        </dialog>
    }
    .into_any())
}

/// "In this tab": notifications while this tab is open, turned on at a
/// click (the browser's permission asked then).
#[component]
fn InThisTab(tab_on: RwSignal<bool>, message: RwSignal<Option<String>>) -> impl IntoView {
    let asking = RwSignal::new(false);
    let turn_on_here = move || {
        asking.set(true);
        message.set(None);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            match web::allowed().await {
                Ok(()) => crate::notify::set_for_tab(tab_on, true),
                Err(why) => message.set(Some(why)),
            }
            asking.set(false);
        });
    };
    let turn_off_here = move || {
        #[cfg(feature = "hydrate")]
        crate::notify::set_for_tab(tab_on, false);
    };
    view! {
        <h3>"In this tab"</h3>
        <p>"A question still waiting after 3 seconds shows a notification while this tab is open, unless its agent is on screen."</p>
        <p class="push-state tab-state">{move || if tab_on.get() { "On in this tab." } else { "Off in this tab." }}</p>
        // The browser's own prompt may wait a while: only this button
        // waits with it.
        <button hidden=tab_on disabled=asking on:click=move |_| turn_on_here()>"Turn on in this tab"</button>
        <button hidden=move || !tab_on.get() on:click=move |_| turn_off_here()>"Turn off in this tab"</button>
    }
}

/// "On this device": this browser's Web Push subscription, turned on or
/// off, and a test sent through it.
#[component]
fn OnThisDevice(device: Device) -> impl IntoView {
    let Device { status, message, busy } = device;
    let subscribed = move || status.with(|status| status.subscribed);
    view! {
        <h3>"On this device"</h3>
        <p>"Questions reach this device while no Shard tab is on its screen, even with the browser closed, and can be answered from the notification."</p>
        <p class="push-state" aria-live="polite">
            {move || status.with(|status| match (&status.service, status.subscribed) {
                (Some(service), true) => format!("On, through {service}."),
                _ => "Off on this device.".to_owned(),
            })}
        </p>
        <p class="push-message" role="status" hidden=move || message.with(Option::is_none)>
            {move || message.get().unwrap_or_default()}
        </p>
        <div class="push-actions">
            <button hidden=subscribed disabled=busy on:click=move |_| device.run(web::Job::Subscribe)>
                "Turn on for this device"
            </button>
            <button hidden=move || !subscribed() disabled=busy on:click=move |_| device.run(web::Job::Test)>
                "Send a test"
            </button>
            <button hidden=move || !subscribed() disabled=busy on:click=move |_| device.run(web::Job::Unsubscribe)>
                "Turn off"
            </button>
        </div>
    }
}

/// What a subscribed device hears of: questions, failed turns, and which
/// agents (each can be left out).
#[component]
fn WhatToSend(device: Device, agents: RwSignal<Vec<AgentInfo>>) -> impl IntoView {
    let Device { status, busy, .. } = device;
    let subscribed = move || status.with(|status| status.subscribed);
    let choice =
        move |pick: fn(&Choices) -> bool| move || status.with(|status| pick(&status.choices));
    let muted = move |agent_id: &str| {
        status.with(|status| status.choices.muted.iter().any(|id| id == agent_id))
    };
    view! {
        <fieldset hidden=move || !subscribed() disabled=busy>
            <legend>"What to send"</legend>
            <label><input type="checkbox" prop:checked=choice(|choices| choices.questions)
                on:change=move |event| device.run(web::Job::Choose("questions", event_target_checked(&event)))/>
                " Questions"</label>
            <label><input type="checkbox" prop:checked=choice(|choices| choices.errors)
                on:change=move |event| device.run(web::Job::Choose("errors", event_target_checked(&event)))/>
                " Failed turns"</label>
            <p class="push-agents-title">"Agents"</p>
            <ul class="push-agents">
                <For each=move || agents.get() key=|agent| agent.agent_id.clone() let(agent)>
                    {
                        let id = agent.agent_id.clone();
                        let label = agent.identity.name.clone().unwrap_or_else(|| agent.agent_id.clone());
                        let (checked_id, changed_id) = (id.clone(), id);
                        view! {
                            <li><label>
                                <input type="checkbox" prop:checked=move || !muted(&checked_id)
                                    on:change=move |event| device.run(web::Job::Mute(changed_id.clone(), !event_target_checked(&event)))/>
                                " " {label}
                            </label></li>
                        }
                    }
                </For>
            </ul>
        </fieldset>
    }
}

/// The dialog's requests: to the daemon's push routes, and to the browser's
/// push manager. Only the dialog's chunk calls them, so they load with it.
mod web {
    #[cfg(feature = "hydrate")]
    use leptos::prelude::*;

    #[cfg(feature = "hydrate")]
    use super::Status;

    // Read only by the browser build: the daemon's first paint never runs one.
    #[cfg_attr(not(feature = "hydrate"), expect(dead_code))]
    pub enum Job {
        Subscribe,
        Unsubscribe,
        Test,
        Choose(&'static str, bool),
        /// An agent left out (`true`) or taken back.
        Mute(String, bool),
    }

    /// Reads the daemon's view of this browser's subscription.
    #[cfg(feature = "hydrate")]
    pub async fn refresh(status: RwSignal<Status>, message: RwSignal<Option<String>>) {
        match get_status().await {
            Ok(now) => status.set(now),
            Err(problem) => message.set(Some(problem)),
        }
    }

    /// Does `job`; what to tell the user, if anything.
    #[cfg(feature = "hydrate")]
    pub async fn run(job: Job, status: RwSignal<Status>) -> Option<String> {
        let done = match job {
            Job::Subscribe => subscribe().await.map(|()| None),
            Job::Unsubscribe => unsubscribe().await.map(|()| None),
            Job::Test => crate::client::post_json("/push/test", "{}")
                .await
                .map(|_| Some("A test notification is on its way.".to_owned())),
            Job::Choose(kind, on) => {
                crate::client::post_json("/push/choices", &format!("{{\"{kind}\":{on}}}"))
                    .await
                    .map(|_| None)
            }
            Job::Mute(agent_id, mute) => {
                let key = if mute { "mute" } else { "unmute" };
                let agent_id = serde_json::to_string(&agent_id).unwrap_or_default();
                crate::client::post_json("/push/choices", &format!("{{\"{key}\":{agent_id}}}"))
                    .await
                    .map(|_| None)
            }
        };
        let now = get_status().await;
        if let Ok(now) = now {
            status.set(now);
        }
        done.unwrap_or_else(Some)
    }

    #[cfg(feature = "hydrate")]
    async fn get_status() -> Result<Status, String> {
        let response = crate::client::with_secret(gloo_net::http::Request::get("/push/choices"))
            .send()
            .await
            .map_err(|_| "The daemon cannot be reached.".to_owned())?;
        if response.status() != 200 {
            return Err(format!("The daemon refused ({}).", response.status()));
        }
        response.json::<Status>().await.map_err(|_| "The daemon's answer is unreadable.".to_owned())
    }

    #[cfg(feature = "hydrate")]
    async fn promised(
        promise: Result<js_sys::Promise, wasm_bindgen::JsValue>,
    ) -> Result<wasm_bindgen::JsValue, String> {
        let promise = promise.map_err(|error| format!("{error:?}"))?;
        wasm_bindgen_futures::JsFuture::from(promise).await.map_err(|error| {
            error
                .dyn_ref::<js_sys::Error>()
                .map(|error| String::from(error.message()))
                .unwrap_or_else(|| format!("{error:?}"))
        })
    }

    #[cfg(feature = "hydrate")]
    use wasm_bindgen::JsCast;
    #[cfg(feature = "hydrate")]
    use web_sys::js_sys;

    #[cfg(feature = "hydrate")]
    async fn push_manager() -> Result<web_sys::PushManager, String> {
        let window = web_sys::window().ok_or("no window")?;
        if !window.is_secure_context() {
            return Err("Notifications need https (or this machine's own address).".to_owned());
        }
        let has_push = js_sys::Reflect::has(&window, &"PushManager".into()).unwrap_or(false);
        if !has_push {
            return Err("This browser cannot receive pushes. On iPhone and iPad, add Shard to the home screen first.".to_owned());
        }
        let ready = promised(window.navigator().service_worker().ready()).await?;
        let registration: web_sys::ServiceWorkerRegistration = ready.unchecked_into();
        registration.push_manager().map_err(|error| format!("{error:?}"))
    }

    /// Asks for the browser's permission to notify (at a click).
    #[cfg(feature = "hydrate")]
    pub async fn allowed() -> Result<(), String> {
        let permission = promised(web_sys::Notification::request_permission()).await?;
        if permission.as_string().as_deref() != Some("granted") {
            return Err(
                "Notifications are blocked for this site in the browser's settings.".to_owned()
            );
        }
        Ok(())
    }

    #[cfg(feature = "hydrate")]
    async fn subscribe() -> Result<(), String> {
        allowed().await?;
        let manager = push_manager().await?;
        let response = crate::client::with_secret(gloo_net::http::Request::get("/push/key"))
            .send()
            .await
            .map_err(|_| "The daemon cannot be reached.".to_owned())?;
        #[derive(serde::Deserialize)]
        struct Key {
            public_key: String,
        }
        let key =
            response.json::<Key>().await.map_err(|_| "No push key from the daemon.".to_owned())?;
        let options = web_sys::PushSubscriptionOptionsInit::new();
        options.set_user_visible_only(true);
        options.set_application_server_key_opt_str(Some(&key.public_key));
        let subscription = promised(manager.subscribe_with_options(&options))
            .await
            .map_err(|said| refused(&said))?;
        let body = js_sys::JSON::stringify(&subscription)
            .ok()
            .and_then(|text| text.as_string())
            .ok_or("The subscription could not be read.")?;
        crate::client::post_json("/push/subscribe", &body).await
    }

    /// The browser's refusal to subscribe, in words a reader can act on.
    #[cfg(feature = "hydrate")]
    fn refused(said: &str) -> String {
        let lower = said.to_lowercase();
        if lower.contains("push service") {
            "This browser could not reach its push service, which pushes need: it may be offline, or a build without one (some Chromium builds).".to_owned()
        } else if lower.contains("permission") || lower.contains("denied") {
            "Notifications are blocked for this site in the browser's settings.".to_owned()
        } else {
            "This browser would not subscribe to pushes; try again, or another browser.".to_owned()
        }
    }

    #[cfg(feature = "hydrate")]
    async fn unsubscribe() -> Result<(), String> {
        if let Ok(manager) = push_manager().await {
            let current = promised(manager.get_subscription()).await?;
            if let Ok(subscription) = current.dyn_into::<web_sys::PushSubscription>() {
                let _ = promised(subscription.unsubscribe()).await;
            }
        }
        crate::client::post_json("/push/unsubscribe", "").await
    }
}
