//! What the egress proxy lets through for one agent: the hosts its policy
//! allows and those a person allowed always go through; with `network =
//! "ask"` any other host is a `permission_request` of `tool_name:
//! "network"` (CONTRACT.md, "Sandbox"), asked as the agent's own questions
//! are: the gate puts the question among the agent's events, where the
//! host broadcasts it, routes it to whoever answers for the agent, applies
//! the headless policy and step-up, and forwards the winning answer to the
//! runtime; [`Answers`] takes that answer out of the agent's input before
//! the agent sees it and hands it back to the waiting connection.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::json;
use shard_agent::sandbox::HostPort;
use shard_protocol::agent::{
    ChoiceIntent, Decision, DetailFormat, PermissionAnswer, PermissionChoice, PermissionDetail,
    PermissionRequest, PermissionResolved,
};
use shard_protocol::message::Response;
use shard_protocol::sandbox::{NETWORK_TOOL, NetworkPolicy};
use shard_protocol::{Envelope, ServerMessage};
use tokio::sync::oneshot;

use super::egress::{Gate, Target, Verdict, Via};

const CHOICE_ONCE: &str = "allow-once";
const CHOICE_ALWAYS: &str = "allow-host";
const CHOICE_DENY: &str = "deny";
/// The most network questions open at once for one agent; past it a new
/// host is refused without asking (a flood of hosts is not a question).
pub const MAX_OPEN: usize = 32;

/// One question a gate waits on.
struct Waiting {
    answer: oneshot::Sender<PermissionAnswer>,
    host: HostPort,
}

/// The network questions of one agent generation, by request id, and
/// where their ends are told: the answer comes out of the agent's input
/// ([`Answers::take`]), and the question is closed among the agent's
/// events as the agent would close its own (`permission_resolved`, and the
/// response to the command that carried the answer).
#[derive(Clone)]
pub struct Answers {
    open: Arc<Mutex<HashMap<String, Waiting>>>,
    home: PathBuf,
    agent_id: String,
    tell: Arc<dyn Tell>,
}

/// Where the gate's lines go: among the events of the agent generation it
/// guards, as if the agent had written them (the runtime implements it on
/// its channel of them).
pub trait Tell: Send + Sync + 'static {
    /// Sends `lines`; `false` once nobody hears them (the host is gone).
    fn tell(&self, lines: Vec<String>) -> BoxFuture<'static, bool>;
}

impl Answers {
    pub fn new(home: PathBuf, agent_id: String, tell: Arc<dyn Tell>) -> Self {
        Self { open: Arc::default(), home, agent_id, tell }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `line` if it answers one of this gate's questions; `false`:
    /// the line is the agent's. An `allow_always` is kept before this
    /// returns, so that whoever hears the question closed finds the host
    /// among the agent's grants.
    pub fn take(&self, line: &[u8]) -> bool {
        // Cheap first: most lines are prompts and answers to the agent's
        // own questions.
        if !contains(line, b"permission_response") || !contains(line, QUESTION_PREFIX.as_bytes()) {
            return false;
        }
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else { return false };
        if value["type"] != "permission_response" {
            return false;
        }
        let Some(request_id) = value["request_id"].as_str() else { return false };
        let Some(waiting) = self.table().remove(request_id) else { return false };
        let answer = match (value["choice_id"].as_str(), &value["decision"]) {
            (Some(choice), _) => PermissionAnswer::Choice(choice.to_owned()),
            (None, decision) => match serde_json::from_value::<Decision>(decision.clone()) {
                Ok(decision) => PermissionAnswer::Decision(decision),
                Err(_) => PermissionAnswer::Decision(Decision::Deny),
            },
        };
        let always = matches!(&answer, PermissionAnswer::Decision(Decision::AllowAlways))
            || matches!(&answer, PermissionAnswer::Choice(choice) if choice == CHOICE_ALWAYS);
        if always
            && let Err(error) =
                super::grants::grant(&self.home, &self.agent_id, waiting.host.clone())
        {
            // This connection goes through; the next one asks again.
            tracing::warn!(agent = %self.agent_id, host = %waiting.host, %error, "cannot keep a network grant");
        }
        let resolved = ServerMessage::PermissionResolved(PermissionResolved {
            request_id: request_id.to_owned(),
            answer: answer.clone(),
            source: None,
        });
        let mut lines = vec![Envelope::new(resolved).to_json()];
        if let Some(id) = value["id"].as_str() {
            let accepted =
                Envelope::new(ServerMessage::Response(Response::accepted("permission_response")));
            lines.push(accepted.with_id(id.to_owned()).to_json());
        }
        // The verdict waits until the question is told closed, so that every
        // client sees it closed before anything its connection then does
        // (the program's result, the turn's end).
        let told = self.tell.tell(lines);
        tokio::spawn(async move {
            told.await;
            let _ = waiting.answer.send(answer);
        });
        true
    }

    fn open(
        &self,
        request_id: String,
        host: HostPort,
    ) -> Option<oneshot::Receiver<PermissionAnswer>> {
        let mut table = self.table();
        if table.len() >= MAX_OPEN {
            return None;
        }
        let (answer, receiver) = oneshot::channel();
        table.insert(request_id, Waiting { answer, host });
        Some(receiver)
    }
}

/// The prefix of every network question's id.
const QUESTION_PREFIX: &str = "net-";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// One agent generation's gate.
pub struct NetworkGate {
    pub network: NetworkPolicy,
    /// Allowed by the policy.
    pub allowed: Vec<HostPort>,
    pub answers: Answers,
}

impl Gate for NetworkGate {
    fn decide(
        &self,
        target: Target,
        via: Via,
        asker: Option<String>,
    ) -> BoxFuture<'static, Verdict> {
        let host = HostPort { host: target.host.to_ascii_lowercase(), port: target.port };
        if self.allowed.contains(&host) {
            return Box::pin(async { Verdict::Allow });
        }
        let answers = self.answers.clone();
        // Read each time: a grant made or taken back a moment ago counts.
        if super::grants::load(&answers.home, &answers.agent_id).contains(&host) {
            return Box::pin(async { Verdict::Allow });
        }
        if self.network != NetworkPolicy::Ask {
            tracing::info!(agent = %answers.agent_id, %host, "sandbox: connection refused by policy");
            return Box::pin(async { Verdict::Deny });
        }
        let request_id = format!("{QUESTION_PREFIX}{}", crate::id::random_hex());
        let Some(answer) = answers.open(request_id.clone(), host.clone()) else {
            tracing::warn!(agent = %answers.agent_id, %host, "sandbox: too many network questions open");
            return Box::pin(async { Verdict::Deny });
        };
        let line = Envelope::new(ServerMessage::PermissionRequest(question(
            &request_id,
            &host,
            via,
            asker.as_deref(),
        )))
        .to_json();
        Box::pin(async move {
            // Dropped unanswered (the connection went, or the agent): the
            // question is withdrawn wherever it is shown.
            let _withdraw = Withdraw { answers: answers.clone(), request_id };
            if !answers.tell.tell(vec![line]).await {
                return Verdict::Deny; // the agent's host is gone
            }
            match answer.await {
                Ok(PermissionAnswer::Decision(Decision::Allow | Decision::AllowAlways)) => {
                    Verdict::Allow
                }
                Ok(PermissionAnswer::Choice(choice))
                    if choice == CHOICE_ONCE || choice == CHOICE_ALWAYS =>
                {
                    Verdict::Allow
                }
                _ => Verdict::Deny,
            }
        })
    }
}

/// Withdraws a network question nobody waits for any more: its connection
/// closed (or the proxy stopped) before a person answered. Every client is
/// told it is closed, as a deny whose `source` is `withdrawn`, so that no
/// tab, inbox or lock screen keeps a question whose answer would do
/// nothing. Once answered, the question is no longer open and this does
/// nothing.
struct Withdraw {
    answers: Answers,
    request_id: String,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if self.answers.table().remove(&self.request_id).is_none() {
            return;
        }
        let resolved = ServerMessage::PermissionResolved(PermissionResolved {
            request_id: std::mem::take(&mut self.request_id),
            answer: PermissionAnswer::Decision(Decision::Deny),
            source: Some(WITHDRAWN.to_owned()),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(self.answers.tell.tell(vec![Envelope::new(resolved).to_json()]));
        }
    }
}

/// The `source` of a network question closed because its connection went.
pub const WITHDRAWN: &str = "withdrawn";

/// The question a person sees.
fn question(request_id: &str, host: &HostPort, via: Via, asker: Option<&str>) -> PermissionRequest {
    let detail = |label: &str, value: String, format| PermissionDetail {
        label: Some(label.to_owned()),
        value,
        format: Some(format),
    };
    let choice = |id: &str, label: String, key: &str, intent| PermissionChoice {
        id: id.to_owned(),
        label,
        description: None,
        accelerator: Some(key.to_owned()),
        intent,
    };
    let how = match via {
        Via::HttpConnect => "HTTPS (CONNECT)",
        Via::Http => "HTTP",
        Via::Socks5 => "SOCKS5",
    };
    PermissionRequest {
        request_id: request_id.to_owned(),
        tool_name: NETWORK_TOOL.to_owned(),
        input: json!({"host": host.host, "port": host.port}),
        prompt: format!(
            "Let this agent connect to {host}? Its sandbox asks about every host its policy does not allow."
        ),
        options: vec![Decision::Allow, Decision::AllowAlways, Decision::Deny],
        details: Some(
            [
                detail("host", host.host.clone(), DetailFormat::Text),
                detail("port", host.port.to_string(), DetailFormat::Text),
                detail("through", how.to_owned(), DetailFormat::Text),
            ]
            .into_iter()
            .chain(asker.map(|asker| {
                detail("process", shard_protocol::display::escaped(asker), DetailFormat::Text)
            }))
            .collect(),
        ),
        choices: Some(vec![
            choice(CHOICE_ONCE, "Allow this connection".to_owned(), "y", ChoiceIntent::Allow),
            choice(
                CHOICE_ALWAYS,
                format!("Always allow {host} for this agent"),
                "a",
                ChoiceIntent::Persist,
            ),
            choice(CHOICE_DENY, "Deny".to_owned(), "n", ChoiceIntent::Deny),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    impl Tell for mpsc::Sender<Vec<String>> {
        fn tell(&self, lines: Vec<String>) -> BoxFuture<'static, bool> {
            let sender = self.clone();
            Box::pin(async move { sender.send(lines).await.is_ok() })
        }
    }

    /// Asks about `host` through `gate`, answers the question `deny` as a
    /// client would, and returns the verdict.
    async fn asked_and_denied(
        gate: &NetworkGate,
        heard: &mut mpsc::Receiver<Vec<String>>,
        host: &str,
    ) -> Verdict {
        let target = Target { host: host.to_owned(), port: 1 };
        let verdict = tokio::spawn(gate.decide(target, Via::Http, None));
        let Some(lines) = heard.recv().await else { panic!("no question") };
        let asked: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        let answer = json!({"type": "permission_response", "request_id": asked["request_id"], "decision": "deny"});
        assert!(gate.answers.take(answer.to_string().as_bytes()));
        verdict.await.unwrap()
    }

    #[tokio::test]
    async fn a_question_is_asked_among_the_events_and_its_answer_taken_from_the_input() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(crate::home::agent_dir(home.path(), "a")).unwrap();
        let (events, mut heard) = mpsc::channel(4);
        let gate = NetworkGate {
            network: NetworkPolicy::Ask,
            allowed: vec![HostPort::parse("allowed.test").unwrap()],
            answers: Answers::new(home.path().to_path_buf(), "a".to_owned(), Arc::new(events)),
        };
        let allowed = Target { host: "Allowed.test".to_owned(), port: 443 };
        assert!(matches!(gate.decide(allowed, Via::HttpConnect, None).await, Verdict::Allow));

        let other = || Target { host: "other.test".to_owned(), port: 8080 };
        let verdict =
            tokio::spawn(gate.decide(other(), Via::Socks5, Some("curl (pid 7)".to_owned())));
        let Some(lines) = heard.recv().await else { panic!() };
        let line = &lines[0];
        let asked: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(asked["type"], "permission_request");
        assert_eq!(asked["tool_name"], "network");
        assert_eq!(asked["input"], json!({"host": "other.test", "port": 8080}));
        let id = asked["request_id"].as_str().unwrap();
        assert!(
            !gate
                .answers
                .take(br#"{"type":"permission_response","request_id":"x","decision":"allow"}"#)
        );
        let answer = json!({"type": "permission_response", "id": "c1", "request_id": id, "choice_id": CHOICE_ALWAYS});
        assert!(gate.answers.take(answer.to_string().as_bytes()));
        assert!(matches!(verdict.await.unwrap(), Verdict::Allow));
        // Closed as the agent closes its own: resolved, and the command answered.
        let Some(lines) = heard.recv().await else { panic!() };
        let resolved: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(
            (resolved["type"].as_str(), resolved["request_id"].as_str()),
            (Some("permission_resolved"), Some(id))
        );
        let response: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(
            (response["id"].as_str(), response["success"].as_bool()),
            (Some("c1"), Some(true))
        );
        // Kept: the next connection goes through without a question.
        assert!(matches!(gate.decide(other(), Via::Http, None).await, Verdict::Allow));
        assert!(heard.try_recv().is_err());

        assert!(matches!(asked_and_denied(&gate, &mut heard, "third.test").await, Verdict::Deny));
        assert_eq!(super::super::grants::load(home.path(), "a").len(), 1, "a deny keeps nothing");
    }

    #[tokio::test]
    async fn a_question_whose_connection_went_is_withdrawn_everywhere() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(crate::home::agent_dir(home.path(), "a")).unwrap();
        let (events, mut heard) = mpsc::channel(4);
        let gate = NetworkGate {
            network: NetworkPolicy::Ask,
            allowed: vec![],
            answers: Answers::new(home.path().to_path_buf(), "a".to_owned(), Arc::new(events)),
        };
        let target = Target { host: "gone.test".to_owned(), port: 443 };
        let waiting = tokio::spawn(gate.decide(target, Via::HttpConnect, None));
        let Some(lines) = heard.recv().await else { panic!() };
        let asked: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        // The proxy drops the verdict when the client hangs up.
        waiting.abort();
        let Some(lines) = heard.recv().await else { panic!() };
        let resolved: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(resolved["type"], "permission_resolved");
        assert_eq!(resolved["request_id"], asked["request_id"]);
        assert_eq!(
            (resolved["decision"].as_str(), resolved["source"].as_str()),
            (Some("deny"), Some(WITHDRAWN))
        );
        // A late answer finds nothing to answer.
        let late = json!({"type": "permission_response", "request_id": asked["request_id"], "decision": "allow"});
        assert!(!gate.answers.take(late.to_string().as_bytes()));
        // An answered question is not withdrawn afterwards.
        assert!(matches!(asked_and_denied(&gate, &mut heard, "kept.test").await, Verdict::Deny));
        let Some(lines) = heard.recv().await else { panic!() };
        let closed: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(
            closed["source"],
            serde_json::Value::Null,
            "closed by the answer, not withdrawn"
        );
        tokio::task::yield_now().await;
        assert!(heard.try_recv().is_err(), "withdrawn after its answer");
    }
}
