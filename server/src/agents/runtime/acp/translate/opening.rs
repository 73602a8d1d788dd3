//! The start: `initialize`, then the agent's earlier session taken up
//! (`session/load`, else `session/resume`, when the agent offers them) or a
//! new one; the session closed and resumed after a cancelled turn (Claude
//! Code's adapter); and Shard's `hello` and `sync` once it is open. The
//! translator has the settings set the new session back first, and sends
//! what Shard's record still owes the agent after.

use std::path::PathBuf;

use agent_client_protocol_schema::ProtocolVersion;
use agent_client_protocol_schema::v1::{
    self as acp, AgentResponse, ClientCapabilities, ClientRequest, CloseSessionRequest,
    FileSystemCapabilities, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    ResumeSessionRequest, SessionConfigOption, SessionModeState,
};
use shard_protocol::ServerMessage;
use shard_protocol::agent::{Hello, LiveWindow, Sync};
use shard_protocol::types::AgentStatus;

use super::{Out, error_event, event};
use crate::agents::runtime::acp::error::AcpError;
use crate::agents::runtime::acp::wire::{self, Outstanding};

/// What Claude Code's ACP adapters call themselves (`agentInfo.name`).
const CLAUDE_ADAPTERS: &[&str] = &["claude-agent-acp", "claude-code-acp"];

enum Phase {
    Initializing(i64),
    Opening {
        id: i64,
        how: How,
    },
    /// Closing the session after a cancelled turn, to resume it afresh.
    Closing(i64),
    Ready,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    New,
    Load,
    Resume,
}

/// Shard's `initialize`: what it implements as an ACP client, and nothing
/// more: text files inside the agent's directory, no terminal.
fn initialize() -> InitializeRequest {
    let fs = FileSystemCapabilities::new().read_text_file(true).write_text_file(true);
    InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(
            ClientCapabilities::new()
                .fs(fs)
                .terminal(false)
                .elicitation(super::elicit::capabilities()),
        )
        .client_info(acp::Implementation::new("shard", env!("CARGO_PKG_VERSION")))
}

/// The opening of the agent's session, and the session once open.
pub(super) struct Opening {
    /// The agent's directory: where its sessions open.
    cwd: PathBuf,
    phase: Phase,
    /// The agent's earlier session, until it is loaded, resumed or given up.
    previous: Option<String>,
    /// Said once ready: the earlier session could not be taken up.
    started_afresh: Option<String>,
    /// The agent can close and resume its session.
    reopens: bool,
    /// The agent takes images in a prompt (`promptCapabilities.image`).
    takes_images: bool,
    /// Reopening the session after a cancelled turn.
    reopening: bool,
    session: Option<acp::SessionId>,
}

/// Where the session stands, as a prompt finds it.
#[derive(Clone, Copy)]
pub(super) enum Session<'a> {
    /// Open: a prompt goes to it.
    Ready(&'a acp::SessionId),
    /// Being reopened after a cancelled turn: a prompt waits, recorded.
    Reopening,
    /// Not open yet.
    NotYet,
}

/// What an answer to the opening gives.
pub(super) enum Opened<'a> {
    /// Lines: the opening's next request, or why the agent cannot be used.
    Lines(Vec<Out>),
    /// The session is open, with the modes and config options it offers.
    Open {
        session: acp::SessionId,
        modes: Option<&'a SessionModeState>,
        options: Option<&'a [SessionConfigOption]>,
    },
}

impl Opening {
    /// The opening of a session in `cwd`, taking up the agent's `previous`
    /// one if it can; and its first request, `initialize`.
    pub(super) fn start(
        cwd: PathBuf,
        previous: Option<String>,
        outstanding: &mut Outstanding,
    ) -> (Self, Out) {
        let (id, line) = outstanding.request(ClientRequest::InitializeRequest(initialize()));
        let opening = Self {
            cwd,
            phase: Phase::Initializing(id),
            previous,
            started_afresh: None,
            reopens: false,
            takes_images: false,
            reopening: false,
            session: None,
        };
        (opening, Out::Agent(line))
    }

    /// The agent has a session: Shard's `hello` and `sync` went out.
    pub(super) fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    pub(super) fn takes_images(&self) -> bool {
        self.takes_images
    }

    pub(super) fn is_reopening(&self) -> bool {
        self.reopening
    }

    /// The agent's session, once it has one (open, or being reopened).
    pub(super) fn session(&self) -> Option<&acp::SessionId> {
        self.session.as_ref()
    }

    /// The agent's session, while it is open.
    pub(super) fn ready_session(&self) -> Option<&acp::SessionId> {
        self.session.as_ref().filter(|_| self.is_ready())
    }

    /// The session as a prompt finds it.
    pub(super) fn for_prompt(&self) -> Session<'_> {
        if self.reopening {
            return Session::Reopening;
        }
        match self.ready_session() {
            Some(session) => Session::Ready(session),
            None => Session::NotYet,
        }
    }

    /// The answer to `initialize` or to the session's opening, if `id` is
    /// one of them.
    pub(super) fn opened<'a>(
        &mut self,
        id: i64,
        result: &'a Result<AgentResponse, acp::Error>,
        outstanding: &mut Outstanding,
    ) -> Option<Opened<'a>> {
        match self.phase {
            Phase::Initializing(asked) if asked == id => {
                Some(Opened::Lines(self.initialized(result, outstanding)))
            }
            Phase::Closing(asked) if asked == id => {
                // Closed or not, the session is resumed: what matters is
                // that the agent drops what the cancelled turn left.
                Some(Opened::Lines(vec![self.open(How::Resume, outstanding)]))
            }
            Phase::Opening { id: asked, how } if asked == id => {
                Some(self.session_opened(how, result, outstanding))
            }
            _ => None,
        }
    }

    fn initialized(
        &mut self,
        result: &Result<AgentResponse, acp::Error>,
        outstanding: &mut Outstanding,
    ) -> Vec<Out> {
        let initialized = match result {
            Ok(AgentResponse::InitializeResponse(initialized)) => initialized,
            Ok(_) => {
                return vec![Out::Fatal(
                    "the agent answered initialize with something else".into(),
                )];
            }
            Err(error) => {
                return vec![Out::Fatal(format!(
                    "the agent refused to start: {}",
                    wire::said(error)
                ))];
            }
        };
        if initialized.protocol_version != ProtocolVersion::V1 {
            return vec![Out::Fatal(format!(
                "the agent speaks ACP version {}, Shard speaks 1",
                initialized.protocol_version
            ))];
        }
        let capabilities = &initialized.agent_capabilities;
        let sessions = &capabilities.session_capabilities;
        // Only for the agent whose bug it works around: Codex offers the
        // same, and refuses a resume right after a close (its writer is
        // still live), which would cost it its session.
        let claude = initialized
            .agent_info
            .as_ref()
            .is_some_and(|info| CLAUDE_ADAPTERS.iter().any(|adapter| info.name.ends_with(adapter)));
        self.reopens = claude && sessions.close.is_some() && sessions.resume.is_some();
        self.takes_images = capabilities.prompt_capabilities.image;
        let how = match self.previous {
            Some(_) if capabilities.load_session => How::Load,
            Some(_) if capabilities.session_capabilities.resume.is_some() => How::Resume,
            Some(_) => {
                self.started_afresh =
                    Some("the agent cannot take up its earlier session".to_owned());
                How::New
            }
            None => How::New,
        };
        vec![self.open(how, outstanding)]
    }

    fn open(&mut self, how: How, outstanding: &mut Outstanding) -> Out {
        let cwd = self.cwd.clone();
        let previous = self.previous.clone().or_else(|| {
            self.session.clone().filter(|_| self.reopening).map(|session| session.0.to_string())
        });
        let request = match (how, previous) {
            (How::Load, Some(session)) => {
                ClientRequest::LoadSessionRequest(LoadSessionRequest::new(session, cwd))
            }
            (How::Resume, Some(session)) => {
                ClientRequest::ResumeSessionRequest(ResumeSessionRequest::new(session, cwd))
            }
            _ => ClientRequest::NewSessionRequest(NewSessionRequest::new(cwd)),
        };
        let (id, line) = outstanding.request(request);
        self.phase = Phase::Opening { id, how };
        Out::Agent(line)
    }

    fn session_opened<'a>(
        &mut self,
        how: How,
        result: &'a Result<AgentResponse, acp::Error>,
        outstanding: &mut Outstanding,
    ) -> Opened<'a> {
        let (session, modes, options) = match (how, result) {
            (How::New, Ok(AgentResponse::NewSessionResponse(opened))) => {
                (opened.session_id.clone(), &opened.modes, &opened.config_options)
            }
            (How::Load, Ok(AgentResponse::LoadSessionResponse(opened))) => {
                (self.resumed_id(), &opened.modes, &opened.config_options)
            }
            (How::Resume, Ok(AgentResponse::ResumeSessionResponse(opened))) => {
                (self.resumed_id(), &opened.modes, &opened.config_options)
            }
            (How::New, Ok(_)) => {
                return Opened::Lines(vec![Out::Fatal(
                    "the agent answered session/new with something else".into(),
                )]);
            }
            (How::New, Err(error)) => {
                return Opened::Lines(vec![Out::Fatal(format!(
                    "the agent cannot open a session: {}",
                    wire::said(error)
                ))]);
            }
            // The earlier session is gone or unreadable to the agent: a new
            // one, said plainly once ready.
            (_, Ok(_)) => {
                let why = "the agent answered with something else".to_owned();
                return Opened::Lines(self.afresh(why, outstanding));
            }
            (_, Err(error)) => return Opened::Lines(self.afresh(wire::said(error), outstanding)),
        };
        self.previous = None;
        self.session = Some(session.clone());
        self.phase = Phase::Ready;
        Opened::Open { session, modes: modes.as_ref(), options: options.as_deref() }
    }

    /// The session taken up: the earlier one, or this one reopened.
    fn resumed_id(&self) -> acp::SessionId {
        match (&self.previous, &self.session) {
            (Some(previous), _) => previous.clone().into(),
            (None, Some(session)) => session.clone(),
            (None, None) => acp::SessionId::new(""),
        }
    }

    fn afresh(&mut self, why: String, outstanding: &mut Outstanding) -> Vec<Out> {
        self.started_afresh = Some(why);
        self.previous = None;
        self.session = None;
        vec![self.open(How::New, outstanding)]
    }

    /// The session is shown to clients as it now is: whether it was only
    /// reopened (they never saw it go). The reopening is over either way.
    pub(super) fn reopened(&mut self) -> bool {
        std::mem::take(&mut self.reopening)
    }

    /// That the earlier session could not be taken up, said plainly, once.
    pub(super) fn afresh_said(&mut self) -> Option<Out> {
        let why = self.started_afresh.take()?;
        Some(error_event(AcpError::StartedAfresh(why).into()))
    }

    /// After a cancelled turn, Claude Code's adapter has its session closed
    /// and resumed before its next prompt: it otherwise answers that prompt
    /// with the cancelled turn's stale end.
    pub(super) fn reopen(&mut self, outstanding: &mut Outstanding) -> Vec<Out> {
        let Some(session) = self.session.clone().filter(|_| self.reopens) else {
            return Vec::new();
        };
        self.reopening = true;
        let request = ClientRequest::CloseSessionRequest(CloseSessionRequest::new(session));
        let (id, line) = outstanding.request(request);
        self.phase = Phase::Closing(id);
        vec![Out::Agent(line)]
    }
}

/// Shard's `hello` and `sync` once the agent has a session: the agent of
/// `runtime`, with Shard's `capabilities` for what it offers, in `mode`.
pub(super) fn greeting(runtime: &str, capabilities: Vec<String>, mode: &str) -> Vec<Out> {
    let hello = Hello {
        protocol_version: "0.1".to_owned(),
        server_version: format!("acp:{runtime}"),
        capabilities: capabilities.clone(),
    };
    let sync = Sync {
        status: AgentStatus::Idle,
        mode: mode.to_owned(),
        capabilities: Some(capabilities),
        runtime_epoch: None,
        live_window: LiveWindow { messages: Vec::new(), compaction_index: None },
        pending_requests: Vec::new(),
        seq: None,
        reset: None,
    };
    vec![event(ServerMessage::Hello(hello)), event(ServerMessage::Sync(sync))]
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{reply, sent};
    use super::*;

    /// An opening past `initialize`, whose agent said `initialized`: the
    /// request that opens its session.
    fn initialized(previous: Option<&str>, initialized: Value) -> (Opening, Outstanding, Value) {
        let mut outstanding = Outstanding::default();
        let (mut opening, first) =
            Opening::start(PathBuf::from("/w"), previous.map(str::to_owned), &mut outstanding);
        let first = sent(&[first]);
        assert_eq!(first["method"], "initialize");
        assert_eq!(first["params"]["clientCapabilities"]["terminal"], false);
        let (id, result) = reply(&mut outstanding, &first, initialized);
        let Some(Opened::Lines(out)) = opening.opened(id, &result, &mut outstanding) else {
            panic!("the session asked for");
        };
        let open = sent(&out);
        (opening, outstanding, open)
    }

    #[test]
    fn an_earlier_session_is_loaded_and_the_session_is_open_to_prompts() {
        let agent = json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true,
                           "promptCapabilities": {"image": true}}});
        let (mut opening, mut outstanding, load) = initialized(Some("s-0"), agent);
        assert_eq!(load["method"], "session/load");
        assert_eq!(
            (load["params"]["sessionId"].as_str(), load["params"]["cwd"].as_str()),
            (Some("s-0"), Some("/w"))
        );
        assert!(matches!(opening.for_prompt(), Session::NotYet));
        let answer = json!({"modes": {"currentModeId": "ask", "availableModes": []}});
        let (id, result) = reply(&mut outstanding, &load, answer);
        let Some(Opened::Open { session, modes, options }) =
            opening.opened(id, &result, &mut outstanding)
        else {
            panic!("open");
        };
        assert_eq!(session.0.as_ref(), "s-0", "the earlier session, taken up");
        assert_eq!(modes.map(|modes| modes.current_mode_id.0.to_string()).as_deref(), Some("ask"));
        assert!(options.is_none());
        assert!(opening.is_ready() && opening.takes_images());
        assert!(matches!(opening.for_prompt(), Session::Ready(ready) if ready.0.as_ref() == "s-0"));
        assert!(!opening.reopened(), "shown afresh");
        assert!(opening.afresh_said().is_none());
        assert!(opening.reopen(&mut outstanding).is_empty(), "not an agent that reopens");
    }

    #[test]
    fn an_earlier_session_that_cannot_be_taken_up_is_a_new_one_said_plainly() {
        let agent = json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true}});
        let (mut opening, mut outstanding, load) = initialized(Some("s-0"), agent);
        let gone = json!({"code": -32603, "message": "no such session"});
        let (id, result) = reply(&mut outstanding, &load, gone);
        let Some(Opened::Lines(out)) = opening.opened(id, &result, &mut outstanding) else {
            panic!("a new session asked for");
        };
        let new = sent(&out);
        assert_eq!(new["method"], "session/new");
        let (id, result) = reply(&mut outstanding, &new, json!({"sessionId": "s-1"}));
        let opened = opening.opened(id, &result, &mut outstanding);
        assert!(
            matches!(opened, Some(Opened::Open { session, .. }) if session.0.as_ref() == "s-1")
        );
        let Some(Out::Host(said)) = opening.afresh_said() else { panic!("said") };
        assert!(said.contains("no such session"), "{said}");
        assert!(opening.afresh_said().is_none(), "said once");
        let unknown = Err(acp::Error::internal_error());
        assert!(opening.opened(99, &unknown, &mut outstanding).is_none(), "not the opening's");
    }

    #[test]
    fn an_agent_of_another_version_or_without_a_session_cannot_be_used() {
        let (mut opening, mut outstanding, new) =
            initialized(None, json!({"protocolVersion": 1, "agentCapabilities": {}}));
        let refused = json!({"code": -32603, "message": "not logged in"});
        let (id, result) = reply(&mut outstanding, &new, refused);
        let Some(Opened::Lines(out)) = opening.opened(id, &result, &mut outstanding) else {
            panic!("an answer");
        };
        assert!(matches!(&out[..], [Out::Fatal(why)] if why.contains("not logged in")));

        let mut outstanding = Outstanding::default();
        let (mut opening, first) = Opening::start(PathBuf::from("/w"), None, &mut outstanding);
        let (id, result) = reply(&mut outstanding, &sent(&[first]), json!({"protocolVersion": 2}));
        let Some(Opened::Lines(out)) = opening.opened(id, &result, &mut outstanding) else {
            panic!("an answer");
        };
        assert!(matches!(&out[..], [Out::Fatal(why)] if why.contains("version 2")), "{out:?}");
    }

    #[test]
    fn claude_codes_adapter_has_its_session_closed_and_resumed_after_a_cancel() {
        let agent = json!({"protocolVersion": 1,
            "agentCapabilities": {"sessionCapabilities": {"close": {}, "resume": {}}},
            "agentInfo": {"name": "@zed-industries/claude-agent-acp", "version": "1"}});
        let (mut opening, mut outstanding, new) = initialized(None, agent);
        let (id, result) = reply(&mut outstanding, &new, json!({"sessionId": "s-1"}));
        assert!(matches!(opening.opened(id, &result, &mut outstanding), Some(Opened::Open { .. })));
        assert!(!opening.reopened());

        let close = sent(&opening.reopen(&mut outstanding));
        assert_eq!(
            (close["method"].as_str(), close["params"]["sessionId"].as_str()),
            (Some("session/close"), Some("s-1"))
        );
        assert!(matches!(opening.for_prompt(), Session::Reopening));
        assert!(opening.ready_session().is_none() && opening.session().is_some());
        let (id, result) = reply(&mut outstanding, &close, json!({}));
        let Some(Opened::Lines(out)) = opening.opened(id, &result, &mut outstanding) else {
            panic!("resumed");
        };
        let resume = sent(&out);
        assert_eq!(
            (resume["method"].as_str(), resume["params"]["sessionId"].as_str()),
            (Some("session/resume"), Some("s-1"))
        );
        let (id, result) = reply(&mut outstanding, &resume, json!({}));
        let opened = opening.opened(id, &result, &mut outstanding);
        assert!(
            matches!(opened, Some(Opened::Open { session, .. }) if session.0.as_ref() == "s-1")
        );
        assert!(opening.is_reopening(), "until the session is shown");
        assert!(opening.reopened(), "clients never saw it go");
        assert!(matches!(opening.for_prompt(), Session::Ready(_)));
    }

    #[test]
    fn the_greeting_says_the_runtime_its_capabilities_and_mode() {
        let lines: Vec<Value> = greeting("fake", vec!["streaming-deltas".to_owned()], "plan")
            .iter()
            .map(|out| match out {
                Out::Host(line) => serde_json::from_str(line).expect("a JSON line"),
                other => panic!("not for the host: {other:?}"),
            })
            .collect();
        assert_eq!(lines[0]["type"], "hello");
        assert_eq!(lines[0]["server_version"], "acp:fake");
        assert_eq!(
            (lines[1]["type"].as_str(), lines[1]["mode"].as_str()),
            (Some("sync"), Some("plan"))
        );
        assert_eq!(lines[1]["capabilities"], json!(["streaming-deltas"]));
    }
}
