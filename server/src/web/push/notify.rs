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
//! - both carry the question's notification tag (agent and request id,
//!   [`question_tag`]), which the service worker shows and closes by;
//! - a failed turn goes as a question does, under its own choice.
//!
//! What a push holds is what a lock screen may show: the agent's name, the
//! tool, a short cleaned summary of the call (a command's first words, a
//! path), never a file's content, a prompt's text or an error's message;
//! each a [`Shown`], cleaned and with what looks like a secret masked
//! ([`super::lock_screen`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use shard_protocol::agent::{Decision, PendingKind, PermissionRequest};
use shard_protocol::web::question_tag;
use tokio::sync::mpsc;

use super::actions::{Actions, Grant};
use super::lock_screen::{Shown, shown};
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
    Failed { agent_id: String, agent: Shown, code: Shown },
    Test { session_id: String },
}

/// A question as a lock screen may show it; made in the host's task, so
/// that nothing of the call but this is copied.
#[derive(Debug)]
struct Question {
    agent_id: String,
    agent: Shown,
    request_id: String,
    summary: Summary,
    /// A permission's call, and the decisions a notification may give.
    call: Option<(String, Vec<Decision>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub title: Shown,
    pub body: Shown,
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
            code: shown(code, 40),
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
                "agent_id": question.agent_id, "agent": question.agent.as_str(),
                "request_id": question.request_id,
                "tag": question_tag(&question.agent_id, &question.request_id),
                "title": question.summary.title.as_str(), "body": question.summary.body.as_str(),
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
                "tag": question_tag(&key.0, &key.1), "at": crate::clock::now_ms(),
            });
            let topic = topic(&key.0, &key.1);
            self.send(&session_id, push, payload, Some(topic), QUESTION_TTL, false);
        }
    }

    fn failed(&mut self, agent_id: &str, agent: &Shown, code: &Shown) {
        for (session_id, push) in self.away(agent_id, |push| push.choices.errors) {
            let payload = json!({
                "v": 1, "kind": "error", "agent_id": agent_id, "agent": agent.as_str(),
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

fn agent_name(agent: &NoticeAgent<'_>) -> Shown {
    match agent.name {
        Some(name) if !name.trim().is_empty() => shown(name, 40),
        _ => shown(agent.agent_id, 40),
    }
}

/// What a lock screen shows of a question.
pub fn summary(agent: &NoticeAgent<'_>, request: &PendingKind) -> Summary {
    let name = agent_name(agent);
    match request {
        PendingKind::Permission(permission) => Summary {
            title: shown(&format!("{name} asks to use {}", permission.tool_name), 40 + 13 + 40),
            body: call_summary(permission),
        },
        PendingKind::Ui(ui) => Summary {
            title: shown(&format!("{name} asks you"), 40 + 9),
            body: shown(
                ui.title.as_deref().or(ui.message.as_deref()).unwrap_or("a question"),
                SUMMARY_CHARS,
            ),
        },
    }
}

/// A call in a few words: a command's start, a path; for any other tool,
/// nothing of its arguments.
fn call_summary(permission: &PermissionRequest) -> Shown {
    let field = |name: &str| permission.input.get(name).and_then(Value::as_str);
    let shown_of = match permission.tool_name.as_str() {
        "bash" => field("command"),
        "write" | "edit" => field("path").or(field("file_path")),
        _ => None,
    };
    shown(shown_of.unwrap_or("Open Shard to see the call."), SUMMARY_CHARS)
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
        assert_eq!(written.title.as_str(), "builder asks to use write");
        assert_eq!(written.body.as_str(), "src/main.rs");
        let other =
            summary(&AGENT, &permission("fetch_url", json!({"url": "https://x/?q=SECRET"})));
        assert!(!other.body.as_str().contains("SECRET"), "{other:?}");
        let long = summary(&AGENT, &permission("bash", json!({"command": "echo ".repeat(100)})));
        let long = long.body.as_str();
        assert!(long.chars().count() <= SUMMARY_CHARS + 1 && long.ends_with('…'));
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
        assert_eq!(summary(&AGENT, &ui).body.as_str(), "Which [31m branch?");
    }

    #[test]
    fn every_text_of_a_question_is_masked_the_tools_name_too() {
        let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        // An ACP agent names its call after the command it runs.
        let acp = summary(
            &NoticeAgent { agent_id: "a2", name: Some("claude") },
            &permission(&format!("`export GH_TOKEN={token}`"), Value::Null),
        );
        assert_eq!(acp.title.as_str(), "claude asks to use `export GH_TOKEN=•••`");
        let written =
            summary(&AGENT, &permission("write", json!({"path": format!("/tmp/{token}.txt")})));
        assert_eq!(written.body.as_str(), "/tmp/•••.txt");
        let ui = PendingKind::Ui(UiRequest {
            request_id: "u1".into(),
            kind: UiKind::Input,
            title: Some(format!("Use {token}?")),
            message: None,
            options: None,
            placeholder: None,
            prefill: None,
            notify_type: None,
        });
        assert_eq!(summary(&AGENT, &ui).body.as_str(), "Use •••?");
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
