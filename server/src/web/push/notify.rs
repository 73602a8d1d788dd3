//! What is pushed, and to whom (docs/NOTIFICATIONS.md): the agents' hosts
//! tell the [`Notifier`] of a question, its end, a failed turn; it queues
//! them (never waiting: a full queue drops a notice, never holds an agent)
//! and one task turns each into the pushes it makes:
//!
//! - a question goes to every subscribed browser that wants questions of
//!   that agent and has no tab on screen (a tab on screen shows it itself);
//!   a permission's push carries an Allow and a Deny token ([`super::actions`]);
//! - its end goes to every browser its question went to, so that the
//!   notification closes everywhere; it has the question's Topic, so that a
//!   push service still holding the question replaces it;
//! - a failed turn goes as a question does, under its own choice.
//!
//! What a push holds is what a lock screen may show: the agent's name, the
//! tool, a short cleaned summary of the call (a command's first words, a
//! path), never a file's content, a prompt's text or an error's message.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use shard_protocol::agent::{Decision, PendingKind, PermissionRequest};
use tokio::sync::mpsc;

use super::actions::{Actions, Grant};
use super::send::{Outgoing, Sender};
use crate::agents::{NoticeAgent, Notices};
use crate::clients::hub::Hub;
use crate::web::auth::{Auth, PushSubscription};

/// Notices waiting for the task: far more than a burst of questions makes.
const NOTICE_QUEUE: usize = 256;
/// Questions whose pushes are remembered, to push their end to the same
/// browsers.
const REMEMBERED_QUESTIONS: usize = 1024;
/// How long a push service keeps a question for a browser that is offline.
const QUESTION_TTL: u32 = 10 * 60;
/// The longest summary a lock screen is shown.
const SUMMARY_CHARS: usize = 80;

/// One thing to tell.
#[derive(Debug)]
enum Notice {
    Asked(Question),
    Settled { agent_id: String, request_id: String },
    Failed { agent_id: String, agent: String, code: String },
    Test { session_id: String },
}

/// A question as a lock screen may show it; made in the host's task, so
/// that nothing of the call but this is copied.
#[derive(Debug)]
struct Question {
    agent_id: String,
    agent: String,
    request_id: String,
    summary: Summary,
    /// A permission's call, and the decisions a notification may give.
    call: Option<(String, Vec<Decision>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub title: String,
    pub body: String,
}

/// The hosts' side: queues notices for the task.
pub struct Notifier {
    queue: mpsc::Sender<Notice>,
}

impl Notifier {
    /// Starts the task that pushes.
    /// `action_ttl`: how long a notification's Allow and Deny work.
    pub fn start(
        auth: Arc<Auth>,
        hub: Arc<Hub>,
        actions: Arc<Actions>,
        sender: Sender,
        action_ttl: Duration,
    ) -> Self {
        let (queue, notices) = mpsc::channel(NOTICE_QUEUE);
        let task = Task { auth, hub, actions, sender, action_ttl, told: Told::default() };
        tokio::spawn(task.run(notices));
        Self { queue }
    }

    fn tell(&self, notice: Notice) {
        if let Err(mpsc::error::TrySendError::Full(notice)) = self.queue.try_send(notice) {
            tracing::warn!(?notice, "push queue full; a notice is dropped");
        }
    }

    /// A test push to one browser, whatever it chose.
    pub fn test(&self, session_id: &str) {
        self.tell(Notice::Test { session_id: session_id.to_owned() });
    }
}

impl Notices for Notifier {
    fn asked(&self, agent: &NoticeAgent<'_>, request: &PendingKind) {
        let call = match request {
            PendingKind::Permission(permission) => {
                let decisions = [Decision::Allow, Decision::Deny]
                    .into_iter()
                    .filter(|decision| permission.options.contains(decision))
                    .collect();
                Some((crate::agents::host::fingerprint(permission), decisions))
            }
            PendingKind::Ui(_) => None,
        };
        self.tell(Notice::Asked(Question {
            agent_id: agent.agent_id.to_owned(),
            agent: agent_name(agent),
            request_id: request.request_id().to_owned(),
            summary: summary(agent, request),
            call,
        }));
    }

    fn settled(&self, agent_id: &str, request_id: &str) {
        self.tell(Notice::Settled {
            agent_id: agent_id.to_owned(),
            request_id: request_id.to_owned(),
        });
    }

    fn failed(&self, agent: &NoticeAgent<'_>, code: &str) {
        self.tell(Notice::Failed {
            agent_id: agent.agent_id.to_owned(),
            agent: agent_name(agent),
            code: clean(code, 40),
        });
    }
}

/// Which browsers each recent question went to.
#[derive(Default)]
struct Told {
    order: VecDeque<(String, String)>,
    sessions: HashMap<(String, String), Vec<String>>,
}

impl Told {
    fn remember(&mut self, key: (String, String), sessions: Vec<String>) {
        if sessions.is_empty() {
            return;
        }
        if self.order.len() >= REMEMBERED_QUESTIONS
            && let Some(oldest) = self.order.pop_front()
        {
            self.sessions.remove(&oldest);
        }
        self.order.push_back(key.clone());
        self.sessions.insert(key, sessions);
    }

    fn forget(&mut self, key: &(String, String)) -> Vec<String> {
        self.order.retain(|known| known != key);
        self.sessions.remove(key).unwrap_or_default()
    }
}

struct Task {
    auth: Arc<Auth>,
    hub: Arc<Hub>,
    actions: Arc<Actions>,
    sender: Sender,
    action_ttl: Duration,
    told: Told,
}

impl Task {
    async fn run(mut self, mut notices: mpsc::Receiver<Notice>) {
        while let Some(notice) = notices.recv().await {
            match notice {
                Notice::Asked(question) => self.asked(question),
                Notice::Settled { agent_id, request_id } => self.settled(agent_id, request_id),
                Notice::Failed { agent_id, agent, code } => self.failed(&agent_id, &agent, &code),
                Notice::Test { session_id } => self.test(&session_id),
            }
        }
    }

    /// Subscribed browsers that want to hear of `agent_id` under `wants`
    /// and have no tab on screen.
    fn away(
        &self,
        agent_id: &str,
        wants: impl Fn(&PushSubscription) -> bool,
    ) -> Vec<(String, PushSubscription)> {
        self.auth
            .subscriptions()
            .into_iter()
            .filter(|(_, push)| wants(push) && !push.choices.muted.iter().any(|id| id == agent_id))
            .filter(|(session, _)| !self.hub.session_visible(&session.session_id))
            .map(|(session, push)| (session.session_id, push))
            .collect()
    }

    fn asked(&mut self, question: Question) {
        let mut sent = Vec::new();
        for (session_id, push) in self.away(&question.agent_id, |push| push.choices.questions) {
            let actions = match &question.call {
                Some((fingerprint, decisions)) => {
                    let grant = Grant {
                        session_id: session_id.clone(),
                        agent_id: question.agent_id.clone(),
                        request_id: question.request_id.clone(),
                        fingerprint: fingerprint.clone(),
                        decision: Decision::Deny,
                    };
                    let minted = self.actions.mint(&grant, decisions, self.action_ttl);
                    minted
                        .into_iter()
                        .map(|(decision, token)| {
                            let (action, title) = match decision {
                                Decision::Allow => ("allow", "Allow"),
                                _ => ("deny", "Deny"),
                            };
                            json!({"action": action, "title": title, "token": token})
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            let payload = json!({
                "v": 1, "kind": "question",
                "agent_id": question.agent_id, "agent": question.agent,
                "request_id": question.request_id,
                "title": question.summary.title, "body": question.summary.body,
                "actions": actions, "at": crate::clock::now_ms(),
            });
            let topic = topic(&question.agent_id, &question.request_id);
            if self.send(&session_id, push, payload, Some(topic), QUESTION_TTL, true) {
                sent.push(session_id);
            }
        }
        self.told.remember((question.agent_id, question.request_id), sent);
    }

    fn settled(&mut self, agent_id: String, request_id: String) {
        self.actions.close(&agent_id, &request_id);
        let key = (agent_id, request_id);
        for session_id in self.told.forget(&key) {
            let Some(push) = self.auth.subscription(&session_id) else { continue };
            let payload = json!({
                "v": 1, "kind": "closed", "agent_id": key.0, "request_id": key.1,
                "at": crate::clock::now_ms(),
            });
            let topic = topic(&key.0, &key.1);
            self.send(&session_id, push, payload, Some(topic), QUESTION_TTL, false);
        }
    }

    fn failed(&mut self, agent_id: &str, agent: &str, code: &str) {
        for (session_id, push) in self.away(agent_id, |push| push.choices.errors) {
            let payload = json!({
                "v": 1, "kind": "error", "agent_id": agent_id, "agent": agent,
                "title": format!("{agent}: the turn failed"),
                "body": format!("Error {code}. Open Shard to see what happened."),
                "at": crate::clock::now_ms(),
            });
            self.send(&session_id, push, payload, None, QUESTION_TTL, false);
        }
    }

    fn test(&mut self, session_id: &str) {
        let Some(push) = self.auth.subscription(session_id) else { return };
        let payload = json!({
            "v": 1, "kind": "test", "title": "Shard",
            "body": "Notifications reach this device.", "at": crate::clock::now_ms(),
        });
        self.send(session_id, push, payload, None, 60, true);
    }

    fn send(
        &mut self,
        session_id: &str,
        push: PushSubscription,
        payload: Value,
        topic: Option<String>,
        ttl: u32,
        urgent: bool,
    ) -> bool {
        let outgoing =
            Outgoing { push, payload: payload.to_string().into_bytes(), topic, ttl, urgent };
        self.sender.send(session_id, outgoing)
    }
}

/// A Topic (RFC 8030 §5.4: at most 32 base64url characters) for one
/// question: its later end replaces it at the push service, and it names
/// nothing the push service could read.
fn topic(agent_id: &str, request_id: &str) -> String {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{agent_id}\0{request_id}"));
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..24])
}

fn agent_name(agent: &NoticeAgent<'_>) -> String {
    match agent.name {
        Some(name) if !name.trim().is_empty() => clean(name, 40),
        _ => clean(agent.agent_id, 40),
    }
}

/// What a lock screen shows of a question.
pub fn summary(agent: &NoticeAgent<'_>, request: &PendingKind) -> Summary {
    let name = agent_name(agent);
    match request {
        PendingKind::Permission(permission) => Summary {
            title: format!("{name} asks to use {}", clean(&permission.tool_name, 40)),
            body: call_summary(permission),
        },
        PendingKind::Ui(ui) => Summary {
            title: format!("{name} asks you"),
            body: clean(
                ui.title.as_deref().or(ui.message.as_deref()).unwrap_or("a question"),
                SUMMARY_CHARS,
            ),
        },
    }
}

/// A call in a few words: a command's start, a path; for any other tool,
/// nothing of its arguments.
fn call_summary(permission: &PermissionRequest) -> String {
    let field = |name: &str| permission.input.get(name).and_then(Value::as_str);
    let shown = match permission.tool_name.as_str() {
        "bash" => field("command").map(|command| clean(&mask_secrets(command), SUMMARY_CHARS)),
        "write" | "edit" => {
            field("path").or(field("file_path")).map(|path| clean(path, SUMMARY_CHARS))
        }
        _ => None,
    };
    shown.unwrap_or_else(|| "Open Shard to see the call.".to_owned())
}

/// `text` on one line, without control or format characters, at most
/// `limit` characters (an ellipsis marks a cut).
pub fn clean(text: &str, limit: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || shard_protocol::diagnostic::unshown(c) {
            space = !out.is_empty();
            continue;
        }
        if count + usize::from(space) >= limit {
            out.push('…');
            return out;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// A command with what looks like a secret replaced by `•••`: the value of
/// a name that says it is one (`API_KEY=…`, `--token …`), and any long
/// mixed run of letters and digits (a key pasted inline).
pub fn mask_secrets(command: &str) -> String {
    const NAMES: [&str; 7] = ["key", "token", "secret", "password", "passwd", "auth", "bearer"];
    let names_secret = |word: &str| {
        let lower = word.to_ascii_lowercase();
        NAMES.iter().any(|name| lower.contains(name))
    };
    let looks_random = |word: &str| {
        word.len() >= 20
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_alphabetic())
            && !word.contains('/')
    };
    let mut out = Vec::new();
    // Words still to hide: the value after `--token`, or the scheme and
    // credentials after `Authorization:`.
    let mut hide = 0;
    for word in command.split_whitespace() {
        if hide > 0 {
            out.push("•••".to_owned());
            hide -= 1;
            continue;
        }
        let lower = word.to_ascii_lowercase();
        if let Some((name, _)) = word.split_once('=').filter(|(name, _)| names_secret(name)) {
            out.push(format!("{name}=•••"));
        } else if looks_random(word.trim_matches(|c: char| !c.is_ascii_alphanumeric())) {
            out.push("•••".to_owned());
        } else {
            if lower.contains("authorization") {
                hide = 2;
            } else if word.starts_with('-') && names_secret(word)
                || matches!(lower.trim_matches('\''), "bearer" | "basic")
            {
                hide = 1;
            }
            out.push(word.to_owned());
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use shard_protocol::agent::{UiKind, UiRequest};

    use super::*;

    fn permission(tool: &str, input: Value) -> PendingKind {
        PendingKind::Permission(PermissionRequest {
            request_id: "r1".into(),
            tool_name: tool.into(),
            input,
            prompt: "the whole prompt, never shown".into(),
            options: vec![Decision::Allow, Decision::Deny],
            details: None,
            choices: None,
        })
    }

    const AGENT: NoticeAgent<'static> = NoticeAgent { agent_id: "a1", name: Some("builder") };

    #[test]
    fn a_lock_screen_sees_the_tool_and_a_few_words_never_contents() {
        let written = summary(
            &AGENT,
            &permission("write", json!({"path": "src/main.rs", "content": "fn main() { SECRET }"})),
        );
        assert_eq!(written.title, "builder asks to use write");
        assert_eq!(written.body, "src/main.rs");
        let other =
            summary(&AGENT, &permission("fetch_url", json!({"url": "https://x/?q=SECRET"})));
        assert!(!other.body.contains("SECRET"), "{other:?}");
        let long = summary(&AGENT, &permission("bash", json!({"command": "echo ".repeat(100)})));
        assert!(long.body.chars().count() <= SUMMARY_CHARS + 1 && long.body.ends_with('…'));
        let ui = PendingKind::Ui(UiRequest {
            request_id: "u1".into(),
            kind: UiKind::Input,
            title: Some("Which\u{1b}[31m branch?\n".into()),
            message: None,
            options: None,
            placeholder: None,
            prefill: None,
            notify_type: None,
        });
        assert_eq!(summary(&AGENT, &ui).body, "Which [31m branch?");
    }

    #[test]
    fn secrets_in_a_command_are_masked() {
        let masked = |command: &str| mask_secrets(command);
        assert_eq!(masked("API_KEY=abc123 make deploy"), "API_KEY=••• make deploy");
        assert_eq!(
            masked("curl -H 'Authorization: Bearer xyz' https://h/"),
            "curl -H 'Authorization: ••• ••• https://h/"
        );
        assert_eq!(masked("gh auth login --token hunter2"), "gh auth login --token •••");
        assert_eq!(masked("export OPENAI=sk9f8e7d6c5b4a3f2e1d0c9b8a"), "export •••");
        assert_eq!(
            masked("cargo test --release -p shard-server"),
            "cargo test --release -p shard-server"
        );
        assert_eq!(
            masked("cat src/a/very/long/path/with/1234/digits.rs"),
            "cat src/a/very/long/path/with/1234/digits.rs"
        );
    }

    #[test]
    fn topics_are_short_opaque_and_per_question() {
        let one = topic("a1", "r1");
        assert_eq!(one.len(), 32);
        assert!(one.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(one, topic("a1", "r2"));
        assert_eq!(one, topic("a1", "r1"));
    }
}
