//! What the egress proxy lets through for one agent: the hosts its policy
//! allows and those a person allowed always go through; with `network =
//! "ask"` any other host is a `permission_request` of `tool_name:
//! "network"` (CONTRACT.md, "Sandbox"), which the daemon asks itself: the
//! gate hands the question to the agent's host ([`Asker`]), which shows
//! it, routes it to whoever answers for the agent, applies the headless
//! policy and step-up as for the agent's own questions, and hands the
//! winning answer back here — never to the agent.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::json;
use shard_platform::sandbox::HostPort;
use shard_protocol::agent::{
    ChoiceIntent, Decision, DetailFormat, PermissionAnswer, PermissionChoice, PermissionDetail,
    PermissionRequest,
};
use shard_protocol::sandbox::{NETWORK_TOOL, NetworkPolicy};
use tokio::sync::oneshot;

use super::egress::{Gate, Target, Verdict, Via};

const CHOICE_ONCE: &str = "allow-once";
const CHOICE_ALWAYS: &str = "allow-host";
const CHOICE_DENY: &str = "deny";
/// The most network questions open at once for one agent; past it a new
/// host is refused without asking (a flood of hosts is not a question).
pub const MAX_OPEN: usize = 32;

/// Where the answer to one question goes: called once, in the host's
/// task, with the winning answer; dropped unanswered, a deny.
pub type Answer = Box<dyn FnOnce(&PermissionAnswer) + Send>;

/// Where the gate's questions go: the host of the agent generation it
/// guards (the runtime implements it on that generation's events).
pub trait Asker: Send + Sync + 'static {
    /// Asks `request`, whose answer goes to `answer`; `false` once nobody
    /// hears it (the host is gone).
    fn ask(&self, request: PermissionRequest, answer: Answer) -> BoxFuture<'static, bool>;
    /// The question `request_id` is moot: its connection went.
    fn withdraw(&self, request_id: String);
}

/// One agent's network questions: which are open, and where they go.
#[derive(Clone)]
pub struct Questions {
    open: Arc<Mutex<HashSet<String>>>,
    home: PathBuf,
    agent_id: String,
    asker: Arc<dyn Asker>,
}

impl Questions {
    pub fn new(home: PathBuf, agent_id: String, asker: Arc<dyn Asker>) -> Self {
        Self { open: Arc::default(), home, agent_id, asker }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A question about `host`, and where its answer comes; `None` past
    /// [`MAX_OPEN`].
    fn open(
        &self,
        request: PermissionRequest,
        host: HostPort,
    ) -> Option<(PermissionRequest, Answer, oneshot::Receiver<PermissionAnswer>)> {
        let mut table = self.table();
        if table.len() >= MAX_OPEN {
            return None;
        }
        table.insert(request.request_id.clone());
        let (sender, receiver) = oneshot::channel();
        let questions = self.clone();
        let request_id = request.request_id.clone();
        // Called in the host's task with the winning answer: an "always"
        // is kept before anyone hears the question closed, so that the
        // agent's sandbox then shows the host among its grants.
        let answer: Answer = Box::new(move |answer: &PermissionAnswer| {
            questions.table().remove(&request_id);
            if always(answer)
                && let Err(error) =
                    super::grants::grant(&questions.home, &questions.agent_id, host.clone())
            {
                // This connection goes through; the next one asks again.
                tracing::warn!(agent = %questions.agent_id, %host, %error, "cannot keep a network grant");
            }
            let _ = sender.send(answer.clone());
        });
        Some((request, answer, receiver))
    }
}

fn always(answer: &PermissionAnswer) -> bool {
    matches!(answer, PermissionAnswer::Decision(Decision::AllowAlways))
        || matches!(answer, PermissionAnswer::Choice(choice) if choice == CHOICE_ALWAYS)
}

/// The prefix of every network question's id.
const QUESTION_PREFIX: &str = "net-";

/// One agent generation's gate.
pub struct NetworkGate {
    pub network: NetworkPolicy,
    /// Allowed by the policy.
    pub allowed: Vec<HostPort>,
    pub questions: Questions,
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
        let questions = self.questions.clone();
        // Read each time: a grant made or taken back a moment ago counts.
        if super::grants::load(&questions.home, &questions.agent_id).contains(&host) {
            return Box::pin(async { Verdict::Allow });
        }
        if self.network != NetworkPolicy::Ask {
            tracing::info!(agent = %questions.agent_id, %host, "sandbox: connection refused by policy");
            return Box::pin(async { Verdict::Deny });
        }
        let request_id = format!("{QUESTION_PREFIX}{}", crate::id::random_hex());
        let request = question(&request_id, &host, via, asker.as_deref());
        let Some((request, answering, answer)) = questions.open(request, host.clone()) else {
            tracing::warn!(agent = %questions.agent_id, %host, "sandbox: too many network questions open");
            return Box::pin(async { Verdict::Deny });
        };
        Box::pin(async move {
            // Dropped unanswered (the connection went, or the agent): the
            // question is withdrawn wherever it is shown.
            let _withdraw = Withdraw { questions: questions.clone(), request_id };
            if !questions.asker.ask(request, answering).await {
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
    questions: Questions,
    request_id: String,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if self.questions.table().remove(&self.request_id) {
            self.questions.asker.withdraw(std::mem::take(&mut self.request_id));
        }
    }
}

/// The `source` of a network question closed because its connection went.
pub const WITHDRAWN: &str = "withdrawn";

/// The question a person sees.
fn question(request_id: &str, host: &HostPort, via: Via, asker: Option<&str>) -> PermissionRequest {
    let detail = PermissionDetail::labelled;
    let choice = PermissionChoice::keyed;
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

    /// What a host would hear: each question asked, each one withdrawn.
    enum Heard {
        Asked(Box<PermissionRequest>, Answer),
        Withdrawn(String),
    }

    struct Host(mpsc::UnboundedSender<Heard>);

    impl Asker for Host {
        fn ask(&self, request: PermissionRequest, answer: Answer) -> BoxFuture<'static, bool> {
            let heard = self.0.send(Heard::Asked(Box::new(request), answer)).is_ok();
            Box::pin(async move { heard })
        }

        fn withdraw(&self, request_id: String) {
            let _ = self.0.send(Heard::Withdrawn(request_id));
        }
    }

    fn gate(
        home: &std::path::Path,
        allowed: Vec<HostPort>,
    ) -> (NetworkGate, mpsc::UnboundedReceiver<Heard>) {
        std::fs::create_dir_all(crate::home::agent_dir(home, "a")).unwrap();
        let (heard, hearing) = mpsc::unbounded_channel();
        let questions = Questions::new(home.to_path_buf(), "a".to_owned(), Arc::new(Host(heard)));
        (NetworkGate { network: NetworkPolicy::Ask, allowed, questions }, hearing)
    }

    async fn asked(hearing: &mut mpsc::UnboundedReceiver<Heard>) -> (PermissionRequest, Answer) {
        match hearing.recv().await {
            Some(Heard::Asked(request, answer)) => (*request, answer),
            _ => panic!("no question"),
        }
    }

    #[tokio::test]
    async fn a_question_goes_to_the_host_and_its_answer_decides_and_is_kept_when_always() {
        let home = tempfile::tempdir().unwrap();
        let (gate, mut hearing) = gate(home.path(), vec![HostPort::parse("allowed.test").unwrap()]);
        let allowed = Target { host: "Allowed.test".to_owned(), port: 443 };
        assert!(matches!(gate.decide(allowed, Via::HttpConnect, None).await, Verdict::Allow));

        let other = || Target { host: "other.test".to_owned(), port: 8080 };
        let verdict =
            tokio::spawn(gate.decide(other(), Via::Socks5, Some("curl (pid 7)".to_owned())));
        let (request, answer) = asked(&mut hearing).await;
        assert_eq!(request.tool_name, "network");
        assert_eq!(request.input, json!({"host": "other.test", "port": 8080}));
        assert!(request.request_id.starts_with(QUESTION_PREFIX));
        answer(&PermissionAnswer::Choice(CHOICE_ALWAYS.to_owned()));
        // Kept before the answer is heard: the host's refresh finds it.
        assert_eq!(super::super::grants::load(home.path(), "a").len(), 1);
        assert!(matches!(verdict.await.unwrap(), Verdict::Allow));
        // Kept: the next connection goes through without a question.
        assert!(matches!(gate.decide(other(), Via::Http, None).await, Verdict::Allow));

        let third = Target { host: "third.test".to_owned(), port: 1 };
        let verdict = tokio::spawn(gate.decide(third, Via::Http, None));
        (asked(&mut hearing).await.1)(&PermissionAnswer::Decision(Decision::Deny));
        assert!(matches!(verdict.await.unwrap(), Verdict::Deny));
        assert_eq!(super::super::grants::load(home.path(), "a").len(), 1, "a deny keeps nothing");
        tokio::task::yield_now().await;
        assert!(hearing.try_recv().is_err(), "an answered question is not withdrawn");
    }

    #[tokio::test]
    async fn a_question_whose_connection_went_is_withdrawn_and_one_never_answered_denies() {
        let home = tempfile::tempdir().unwrap();
        let (gate, mut hearing) = gate(home.path(), vec![]);
        let target = || Target { host: "gone.test".to_owned(), port: 443 };
        let waiting = tokio::spawn(gate.decide(target(), Via::HttpConnect, None));
        let (request, _answer) = asked(&mut hearing).await;
        // The proxy drops the verdict when the client hangs up.
        waiting.abort();
        let Some(Heard::Withdrawn(request_id)) = hearing.recv().await else { panic!() };
        assert_eq!(request_id, request.request_id);
        // The host dropped it unanswered (its process ended): a deny.
        let verdict = tokio::spawn(gate.decide(target(), Via::HttpConnect, None));
        drop(asked(&mut hearing).await);
        assert!(matches!(verdict.await.unwrap(), Verdict::Deny));
    }
}
