//! Passkeys in the page (docs/SECURITY.md, "Passkey step-up"): adding one
//! to this browser (from its dialog, views::browser) and the step-up
//! an allow the daemon guards asks for. The browser's own WebAuthn JSON
//! helpers (`parse…OptionsFromJSON`, `toJSON`) read the daemon's options
//! and write what it verifies. Loaded as chunks, when first used.

#[cfg(feature = "hydrate")]
use crate::link::Link;

/// An allow was refused for want of a passkey: asks for it, and if it
/// holds, the daemon allows that very call. All of it is the `passkey`
/// chunk's, loaded the first time.
#[cfg(feature = "hydrate")]
pub fn step_up(link: Link, agent_id: String, request_id: String) {
    leptos::task::spawn_local(async move {
        let _ = confirm(link, agent_id, request_id).await;
    });
}

#[cfg(feature = "hydrate")]
#[leptos::wasm_split::wasm_split(passkey, wasm_split_path = ::leptos::wasm_split, fallible)]
fn confirm(link: Link, agent_id: String, request_id: String) -> Result<(), super::Unloaded> {
    link.tell("Allowing this needs this browser's passkey: confirm it.".to_owned());
    leptos::task::spawn_local(async move {
        match web::approve(&agent_id, &request_id).await {
            Ok(()) => link.tell("Allowed with the passkey.".to_owned()),
            Err(problem) if problem.starts_with("this browser has no passkey") => link.tell(
                "Not allowed: this browser has no passkey yet. Add one in \u{201c}This browser\u{201d} at the top, then allow again.".to_owned(),
            ),
            Err(problem) => link.tell(format!("Not allowed: {problem}")),
        }
    });
    Ok(())
}

/// Registers a passkey for this browser session; what to tell the user.
#[cfg(feature = "hydrate")]
pub async fn register() -> Result<(), String> {
    web::register().await
}

#[cfg(feature = "hydrate")]
mod web {
    use wasm_bindgen::{JsCast, JsValue};
    use web_sys::js_sys::{self, Function, Object, Promise, Reflect};

    fn said(error: JsValue) -> String {
        error
            .dyn_ref::<js_sys::Error>()
            .map(|error| String::from(error.message()))
            .unwrap_or_else(|| format!("{error:?}"))
    }

    async fn post(path: &str, body: String) -> Result<String, String> {
        let request = crate::client::with_secret(gloo_net::http::Request::post(path))
            .header("content-type", "application/json")
            .body(body)
            .map_err(|_| "the request could not be made".to_owned())?;
        let response =
            request.send().await.map_err(|_| "the daemon cannot be reached".to_owned())?;
        let text = response.text().await.unwrap_or_default();
        if !(200..300).contains(&response.status()) {
            // The daemon's `{code, message}`, else its text.
            let message = js_sys::JSON::parse(&text)
                .ok()
                .and_then(|parsed| Reflect::get(&parsed, &"message".into()).ok())
                .and_then(|message| message.as_string());
            return Err(message.unwrap_or(text));
        }
        Ok(text)
    }

    /// `navigator.credentials.create` or `.get` with the daemon's options;
    /// the credential as the JSON the daemon reads.
    async fn ceremony(create: bool, options: &str) -> Result<String, String> {
        let window = web_sys::window().ok_or("no window")?;
        let class = Reflect::get(&window, &"PublicKeyCredential".into()).map_err(said)?;
        if class.is_undefined() {
            return Err("this browser has no passkeys".to_owned());
        }
        let parser =
            if create { "parseCreationOptionsFromJSON" } else { "parseRequestOptionsFromJSON" };
        let parse: Function = Reflect::get(&class, &parser.into())
            .map_err(said)?
            .dyn_into()
            .map_err(|_| "this browser is too old for passkeys here".to_owned())?;
        let options = js_sys::JSON::parse(options).map_err(said)?;
        let public_key = Reflect::get(&options, &"publicKey".into()).map_err(said)?;
        let parsed = parse.call1(&class, &public_key).map_err(said)?;
        let wrapper = Object::new();
        Reflect::set(&wrapper, &"publicKey".into(), &parsed).map_err(said)?;
        let credentials = Reflect::get(&window.navigator(), &"credentials".into()).map_err(said)?;
        let method: Function =
            Reflect::get(&credentials, &(if create { "create" } else { "get" }).into())
                .map_err(said)?
                .dyn_into()
                .map_err(|_| "no credentials API".to_owned())?;
        let promise: Promise =
            method.call1(&credentials, &wrapper).map_err(said)?.dyn_into().map_err(said)?;
        let credential = wasm_bindgen_futures::JsFuture::from(promise).await.map_err(said)?;
        js_sys::JSON::stringify(&credential)
            .ok()
            .and_then(|text| text.as_string())
            .ok_or_else(|| "the credential could not be read".to_owned())
    }

    /// A browser that has a passkey proves one to add another: the
    /// daemon's options then carry `prove` (docs/SECURITY.md).
    pub async fn register() -> Result<(), String> {
        let options = post("/passkey/register/start", "{}".to_owned()).await?;
        let prove = js_sys::JSON::parse(&options)
            .ok()
            .and_then(|parsed| Reflect::get(&parsed, &"prove".into()).ok())
            .filter(JsValue::is_object)
            .and_then(|prove| js_sys::JSON::stringify(&prove).ok())
            .and_then(|text| text.as_string());
        let assertion = match prove {
            Some(prove) => Some(ceremony(false, &prove).await?),
            None => None,
        };
        let credential = ceremony(true, &options).await?;
        let body = match assertion {
            Some(assertion) => format!(r#"{{"credential":{credential},"assertion":{assertion}}}"#),
            None => credential,
        };
        post("/passkey/register/finish", body).await.map(|_| ())
    }

    pub async fn approve(agent_id: &str, request_id: &str) -> Result<(), String> {
        let body = serde_json::json!({"agent_id": agent_id, "request_id": request_id}).to_string();
        let options = post("/passkey/approve/start", body).await?;
        let assertion = ceremony(false, &options).await?;
        post("/passkey/approve/finish", assertion).await.map(|_| ())
    }
}
