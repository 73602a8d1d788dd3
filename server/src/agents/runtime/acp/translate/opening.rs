//! The start: `initialize`, then the agent's earlier session taken up
//! (`session/load`, else `session/resume`, when the agent offers them) or a
//! new one; then Shard's `hello` and `sync`, and what Shard's record still
//! owes the agent.

use agent_client_protocol_schema::ProtocolVersion;
use agent_client_protocol_schema::v1::{
    self as acp, AgentResponse, ClientCapabilities, ClientRequest, CloseSessionRequest,
    FileSystemCapabilities, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    ResumeSessionRequest,
};
use shard_protocol::ServerMessage;
use shard_protocol::agent::{Hello, LiveWindow, Sync};
use shard_protocol::types::AgentStatus;

use super::{Out, Translator, error_event, event};
use crate::agents::runtime::acp::error::AcpError;

/// What Claude Code's ACP adapters call themselves (`agentInfo.name`).
const CLAUDE_ADAPTERS: &[&str] = &["claude-agent-acp", "claude-code-acp"];

pub(super) enum Phase {
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
pub(super) enum How {
    New,
    Load,
    Resume,
}

/// Shard's `initialize`: what it implements as an ACP client, and nothing
/// more: text files inside the agent's directory, no terminal.
pub(super) fn initialize() -> InitializeRequest {
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

impl Translator {
    /// The answer to `initialize` or to the session's opening, if `id` is
    /// one of them.
    pub(super) fn opened(
        &mut self,
        id: i64,
        result: &Result<AgentResponse, acp::Error>,
    ) -> Option<Vec<Out>> {
        match self.phase {
            Phase::Initializing(asked) if asked == id => Some(self.initialized(result)),
            Phase::Closing(asked) if asked == id => {
                // Closed or not, the session is resumed: what matters is
                // that the agent drops what the cancelled turn left.
                Some(vec![self.open(How::Resume)])
            }
            Phase::Opening { id: asked, how } if asked == id => {
                Some(self.session_opened(how, result))
            }
            _ => None,
        }
    }

    fn initialized(&mut self, result: &Result<AgentResponse, acp::Error>) -> Vec<Out> {
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
                    super::wire::said(error)
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
        vec![self.open(how)]
    }

    fn open(&mut self, how: How) -> Out {
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
        let (id, line) = self.outstanding.request(request);
        self.phase = Phase::Opening { id, how };
        Out::Agent(line)
    }

    fn session_opened(&mut self, how: How, result: &Result<AgentResponse, acp::Error>) -> Vec<Out> {
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
                return vec![Out::Fatal(
                    "the agent answered session/new with something else".into(),
                )];
            }
            (How::New, Err(error)) => {
                return vec![Out::Fatal(format!(
                    "the agent cannot open a session: {}",
                    super::wire::said(error)
                ))];
            }
            // The earlier session is gone or unreadable to the agent: a new
            // one, said plainly once ready.
            (_, Ok(_)) => return self.afresh("the agent answered with something else".to_owned()),
            (_, Err(error)) => return self.afresh(super::wire::said(error)),
        };
        let wanted = self.settings.wanted(self.reopening);
        self.settings.offered(modes.as_ref(), options.as_deref());
        self.previous = None;
        self.session = Some(session.clone());
        self.phase = Phase::Ready;
        let mut out = vec![Out::Session(session.0.to_string())];
        let restoring = self.settings.restore(&mut self.outstanding, wanted, &session);
        if !restoring.is_empty() {
            // Shown once the agent has answered (while reopening, prompts
            // meanwhile wait as follow-ups).
            out.extend(restoring);
            return out;
        }
        out.extend(self.session_shown());
        out
    }

    /// The session opened, with the mode and model it must have: clients
    /// see it (a `hello` and `sync`, or nothing new after a reopening),
    /// then what could not be kept, and the first follow-up owed.
    pub(super) fn session_shown(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        if std::mem::take(&mut self.reopening) {
            // The clients never saw the session go: no new hello, only
            // what could not be kept, and the prompts that waited.
            out.extend(self.said_then_owed());
        } else {
            out.extend(self.ready());
        }
        out
    }

    /// What could not be kept (the earlier session, a recorded mode or
    /// model), said plainly, then the first follow-up owed.
    fn said_then_owed(&mut self) -> Vec<Out> {
        let afresh = self.started_afresh.take().map(AcpError::StartedAfresh);
        let mut out: Vec<Out> = afresh.into_iter().map(|error| error_event(error.into())).collect();
        out.extend(self.settings.unrestored_said());
        out.extend(self.next_queued());
        out
    }

    /// The session taken up: the earlier one, or this one reopened.
    fn resumed_id(&self) -> acp::SessionId {
        match (&self.previous, &self.session) {
            (Some(previous), _) => previous.clone().into(),
            (None, Some(session)) => session.clone(),
            (None, None) => acp::SessionId::new(""),
        }
    }

    fn afresh(&mut self, why: String) -> Vec<Out> {
        self.started_afresh = Some(why);
        self.previous = None;
        self.session = None;
        vec![self.open(How::New)]
    }

    /// After a cancelled turn, Claude Code's adapter has its session closed
    /// and resumed before its next prompt: it otherwise answers that prompt
    /// with the cancelled turn's stale end.
    pub(super) fn reopen(&mut self) -> Vec<Out> {
        let Some(session) = self.session.clone().filter(|_| self.reopens) else {
            return Vec::new();
        };
        self.reopening = true;
        let request = ClientRequest::CloseSessionRequest(CloseSessionRequest::new(session));
        let (id, line) = self.outstanding.request(request);
        self.phase = Phase::Closing(id);
        vec![Out::Agent(line)]
    }

    /// Shard's `hello` and `sync` once the agent has a session, what it
    /// could not take up said plainly, and the first follow-up still owed.
    fn ready(&mut self) -> Vec<Out> {
        let capabilities = self.settings.capabilities();
        let hello = Hello {
            protocol_version: "0.1".to_owned(),
            server_version: format!("acp:{}", self.settings.runtime()),
            capabilities: capabilities.clone(),
        };
        let sync = Sync {
            status: AgentStatus::Idle,
            mode: self.settings.mode().to_owned(),
            capabilities: Some(capabilities),
            runtime_epoch: None,
            live_window: LiveWindow { messages: Vec::new(), compaction_index: None },
            pending_requests: Vec::new(),
            seq: None,
            reset: None,
        };
        let mut out = vec![event(ServerMessage::Hello(hello)), event(ServerMessage::Sync(sync))];
        out.extend(self.said_then_owed());
        out
    }
}
