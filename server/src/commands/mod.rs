//! Every command a client may send: the one table that says who may run it
//! and how it is answered ([`rule`]), the one check of that table
//! ([`authorize`]), and the commands themselves, one module per family:
//!
//! - [`agent`]: `agent.*` (the registry of agents, attachments, stops);
//! - [`routed`]: the per-agent commands (§9) a host runs, and the lease;
//! - [`daemon`]: `daemon.*`, local only;
//! - [`subagent`]: `subagent.*` (background jobs, docs/JOBS.md);
//! - [`workspace`]: `workspace.*` (docs/WORKSPACES.md);
//! - [`usage`], [`approvals`], [`session`], [`search`]: the rollups, the
//!   approval history, `session.activate`, `search.query`;
//! - [`budget`]: `budget.*` (what agents may spend).
//!
//! A connection (`clients::connection`) decodes a frame, asks [`rule`] and
//! [`authorize`], and runs what [`run`] (or [`routed::run`]) hands back: an
//! answer now, a task whose answer comes later (in the background or only
//! while the connection lasts, as the rule says), or nothing when the
//! agent's host answers itself.

pub mod agent;
pub mod approvals;
pub mod budget;
pub mod daemon;
pub mod error;
pub mod routed;
pub mod search;
pub mod session;
pub mod subagent;
pub mod usage;
pub mod workspace;

use std::collections::HashMap;
use std::sync::Arc;

use shard_protocol::approvals::Answerer;
use shard_protocol::envelope::MessageSet;
use shard_protocol::orchestrator::{AttachRole, BrowserSession, RevokeSession, StatsResult};
use shard_protocol::{ClientMessage, WireError};

pub use self::error::CommandError;

use crate::agents::Sub;
use crate::agents::error::AgentError;
use crate::agents::hosts::Refused;
use crate::agents::registry::Registry;
use crate::jobs::Jobs;
use crate::workspaces::Workspaces;

/// What a command may reach: the registry, jobs, workspaces, and the
/// daemon's own controls (enrollment, sessions, shutdown).
pub trait Daemon: Send + Sync {
    fn registry(&self) -> &Registry;
    /// Background subagent jobs (§10.3).
    fn jobs(&self) -> &Arc<Jobs>;
    /// Git worktree workspaces (§10.1a).
    fn workspaces(&self) -> &Arc<Workspaces>;
    /// A new single-use enrollment URL (also printed on the daemon's stdout).
    fn enroll(&self) -> String;
    /// Starts a shutdown: graceful, or forced (agents killed at once).
    fn shutdown(&self, force: bool);
    /// The enrolled browser sessions.
    fn sessions(&self) -> Vec<BrowserSession>;
    /// Connection and queue figures.
    fn stats(&self) -> StatsResult;
    /// Whether the connection gets `fleet_updated` from now on.
    fn watch_fleet(&self, connection: crate::agents::SubscriberId, watch: bool);
    /// Closes browser connections (one session's, or all) without revoking.
    fn disconnect(&self, target: RevokeSession) -> u32;
    /// Revokes sessions and closes their sockets; returns the revoked ids.
    fn revoke(&self, target: RevokeSession) -> Result<Vec<String>, WireError>;
    /// Whether a connection's client is on screen (`client.presence`).
    fn presence(&self, connection: crate::agents::SubscriberId, visible: bool);
}

/// Which transports may send a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Any client: a browser or a local one.
    Anyone,
    /// Only the unix socket (CONTRACT.md: administration is local).
    Local,
    /// A person's client, a browser or a local tool, and never an agent's
    /// own process: what it reads spans every agent's transcripts, and an
    /// agent speaks to the daemon only for its own jobs.
    People,
    /// No client: the daemon sends it to its own agent process.
    Daemon,
}

/// What a command needs of the connection's attachment to the agent it is
/// about ([`subject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attachment {
    /// Nothing: the command is about no one agent, or creates one.
    None,
    /// A read: any attachment.
    Watch,
    /// A read that answers everyone, and less to a connection not attached
    /// (`subagent.status` without what the runs said).
    WatchOrRedacted,
    /// A change: an interactive attachment.
    Act,
    /// An answer to the agent's question: an interactive attachment, or an
    /// interactive ancestor's for a delegated child (§6.3).
    Answer,
    /// A stop of the agent's subagent work: an interactive attachment to
    /// it or to any of its ancestors. Whoever steers an agent may stop
    /// what it delegated, at any depth; a stop only ever takes away.
    Stop,
}

/// How a command is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answering {
    /// At once, by the connection.
    Inline,
    /// By a task of its own (a slow command), a bounded number per
    /// connection.
    Background,
    /// By a task that only watches and ends with its connection.
    Watching,
    /// By the agent's host, which answers itself.
    Host,
}

/// Who may run a command and how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub reach: Reach,
    pub attachment: Attachment,
    pub answering: Answering,
}

const fn rule_of(reach: Reach, attachment: Attachment, answering: Answering) -> Rule {
    Rule { reach, attachment, answering }
}

/// The table: every command's rule (docs/SECURITY.md, "Delegation never
/// widens"; PROTOCOL.md §4.3, §6.3). No arm is a wildcard, so a new command
/// cannot arrive without one.
pub fn rule(message: &ClientMessage) -> Rule {
    use Answering::{Background, Host, Inline, Watching};
    use Attachment::{Act, Answer, None, Stop, Watch, WatchOrRedacted};
    use Reach::{Anyone, Daemon, Local, People};
    match message {
        ClientMessage::Prompt(_)
        | ClientMessage::Steer(_)
        | ClientMessage::Abort(_)
        | ClientMessage::SetMode(_)
        | ClientMessage::SetModel(_)
        | ClientMessage::SetReasoningLevel(_)
        | ClientMessage::RecallSteer(_) => rule_of(Anyone, Act, Host),
        ClientMessage::Hold(_) => rule_of(Daemon, Act, Host),
        ClientMessage::SessionOp(shard_protocol::agent::SessionOp::List) => {
            rule_of(Anyone, Watch, Host)
        }
        ClientMessage::SessionOp(_) => rule_of(Anyone, Act, Host),
        ClientMessage::ListModes(_)
        | ClientMessage::ListModels(_)
        | ClientMessage::ListReasoningLevels(_)
        | ClientMessage::ListCommands(_) => rule_of(Anyone, Watch, Host),
        ClientMessage::PermissionResponse(_) | ClientMessage::UiResponse(_) => {
            rule_of(Anyone, Answer, Host)
        }
        ClientMessage::AgentList(_) | ClientMessage::AgentStatus(_) => {
            rule_of(Anyone, None, Inline)
        }
        // Attaching is how an attachment is made; detaching ends one, and
        // terminating or killing stops a process any client may stop
        // (§4.3): none needs one first.
        ClientMessage::AgentAttach(_) | ClientMessage::AgentDetach(_) => {
            rule_of(Anyone, None, Host)
        }
        ClientMessage::AgentCreate(_)
        | ClientMessage::AgentTerminate(_)
        | ClientMessage::AgentKill(_) => rule_of(Anyone, None, Background),
        ClientMessage::DaemonShutdown(_)
        | ClientMessage::DaemonEnroll(_)
        | ClientMessage::DaemonSessions(_)
        | ClientMessage::DaemonStats(_)
        | ClientMessage::DaemonRevokeSession(_)
        | ClientMessage::DaemonDisconnect(_) => rule_of(Local, None, Inline),
        ClientMessage::SubagentCreate(_)
        | ClientMessage::SubagentSteer(_)
        | ClientMessage::SubagentRelaunch(_) => rule_of(Anyone, Act, Background),
        ClientMessage::SubagentStop(_) => rule_of(Anyone, Stop, Background),
        ClientMessage::SubagentWait(_) => rule_of(Anyone, Watch, Watching),
        ClientMessage::SubagentStatus(_) => rule_of(Anyone, WatchOrRedacted, Background),
        ClientMessage::WorkspaceCreate(_)
        | ClientMessage::WorkspaceAttach(_)
        | ClientMessage::WorkspaceList(_)
        | ClientMessage::WorkspaceStatus(_)
        | ClientMessage::WorkspaceRetire(_)
        | ClientMessage::WorkspaceCommit(_)
        | ClientMessage::WorkspaceMerge(_)
        | ClientMessage::WorkspacePush(_) => rule_of(Anyone, None, Background),
        ClientMessage::UsageGlobal(_) | ClientMessage::UsageAgent(_) => {
            rule_of(Anyone, None, Inline)
        }
        ClientMessage::UsageSession(_) => rule_of(Anyone, None, Background),
        ClientMessage::ApprovalList(_) => rule_of(Anyone, Watch, Background),
        // Taking a host back only narrows, but it is a change to the agent.
        ClientMessage::SandboxRevoke(_) => rule_of(Anyone, Act, Background),
        ClientMessage::SessionActivate(_) => rule_of(Anyone, Act, Background),
        ClientMessage::RuntimeList(_) => rule_of(Anyone, None, Background),
        // Reading transcripts needs no attachment (attaching needs none),
        // but it is a person's: not an agent process's (docs/SECURITY.md).
        ClientMessage::SearchQuery(_) => rule_of(People, None, Background),
        ClientMessage::ClientPresence(_)
        | ClientMessage::FleetWatch(_)
        | ClientMessage::BudgetList(_)
        | ClientMessage::NodeList(_) => rule_of(Anyone, None, Inline),
        // Spending more is a person's to decide, never an agent's; from
        // away under `[step_up]` a raise goes through the budget's
        // question and its passkey (docs/SECURITY.md).
        ClientMessage::BudgetSet(_) => rule_of(People, None, Background),
    }
}

/// The agent a registry command's attachment rule is about (a per-agent
/// command's is its envelope's `agent_id`).
pub fn subject(message: &ClientMessage) -> Option<&str> {
    match message {
        ClientMessage::SubagentCreate(request) => Some(&request.parent_agent_id),
        ClientMessage::SubagentWait(request) => Some(&request.parent_agent_id),
        ClientMessage::SubagentSteer(request) => Some(&request.parent_agent_id),
        ClientMessage::SubagentRelaunch(request) => Some(&request.parent_agent_id),
        ClientMessage::SubagentStatus(request) => Some(&request.parent_agent_id),
        ClientMessage::SubagentStop(request) => Some(&request.parent_agent_id),
        ClientMessage::ApprovalList(query) => Some(&query.agent_id),
        ClientMessage::SandboxRevoke(request) => Some(&request.agent_id),
        ClientMessage::SessionActivate(request) => Some(&request.agent_id),
        _ => Option::None,
    }
}

/// Where a command came from, as far as its rule's reach goes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Door {
    /// The unix socket (else a browser's WebSocket or route).
    pub local: bool,
    /// An agent's own process speaks on it (unix socket only).
    pub an_agent: bool,
}

/// What the caller is with respect to the agent a command is about, for
/// [`authorize`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Standing {
    /// Its attachment to the agent, if any.
    pub role: Option<AttachRole>,
    /// Whether it is the agent's own process (its `subagent_*` tools on the
    /// unix socket): the agent speaks for itself.
    pub is_the_agent: bool,
    /// Whether it may answer the agent's questions as an interactive
    /// ancestor's client (§6.3).
    pub delegate: bool,
    /// An answer bound to the one call it was shown for: a notification's
    /// Allow or Deny, or an allow after a passkey step-up, by an enrolled
    /// person. It answers that call, and nothing else, as an interactive
    /// attachment would; the host checks the call is still the one shown.
    pub bound: bool,
}

/// The one check of the table: `message`'s reach against the `door` it
/// came through, then its attachment rule against the caller's `standing`
/// to its `subject`, if it is about one agent. Every command, from a
/// connection or a route, is admitted here.
pub fn admit(
    message: &ClientMessage,
    door: Door,
    subject: Option<(&str, Standing)>,
) -> Result<Grant, CommandError> {
    let rule = rule(message);
    if rule.reach == Reach::Local && !door.local {
        return Err(local_only(message));
    }
    if rule.reach == Reach::Daemon {
        return Err(CommandError::DaemonOnly(message.type_name()));
    }
    if rule.reach == Reach::People && door.an_agent {
        return Err(CommandError::NotForAgents(message.type_name()));
    }
    match subject {
        Some((agent_id, standing)) => authorize(rule.attachment, agent_id, standing),
        Option::None => Ok(Grant::Whole),
    }
}

/// What [`authorize`] grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The command runs as asked.
    Whole,
    /// The command runs, its answer without what only attached clients see.
    Redacted,
}

/// Checks `attachment` for the agent `agent_id` against the caller's
/// `standing`: the one place an attachment rule is decided.
fn authorize(
    attachment: Attachment,
    agent_id: &str,
    standing: Standing,
) -> Result<Grant, CommandError> {
    if standing.is_the_agent {
        return Ok(Grant::Whole);
    }
    let role = standing.role;
    match (attachment, role) {
        (Attachment::None, _) => Ok(Grant::Whole),
        (Attachment::Answer | Attachment::Stop, _) if standing.delegate => Ok(Grant::Whole),
        (Attachment::Answer, _) if standing.bound => Ok(Grant::Whole),
        (Attachment::WatchOrRedacted, Option::None) => Ok(Grant::Redacted),
        (Attachment::Act | Attachment::Stop, Option::None) => {
            Err(CommandError::ActUnattached(agent_id.to_owned()))
        }
        (Attachment::Answer, Option::None) => {
            Err(CommandError::AnswerUnattached(agent_id.to_owned()))
        }
        (Attachment::Watch, Option::None) => {
            Err(CommandError::WatchUnattached(agent_id.to_owned()))
        }
        (Attachment::Answer, Some(AttachRole::Observer)) => Err(CommandError::ObserverAnswers),
        (Attachment::Act | Attachment::Stop, Some(AttachRole::Observer)) => {
            Err(CommandError::ObserverActs)
        }
        _ => Ok(Grant::Whole),
    }
}

/// Why a local-only command is refused on a browser's connection.
fn local_only(message: &ClientMessage) -> CommandError {
    let why = match message {
        ClientMessage::DaemonShutdown(_) => {
            "the daemon is stopped locally: use the unix socket or a signal"
        }
        _ => {
            "enrollment and session administration are local: use the unix socket (`shard enroll`, `shard sessions`)"
        }
    };
    CommandError::LocalOnly(why)
}

/// A response (success or failure) ready to send.
pub type Answer = Result<Option<serde_json::Value>, WireError>;

/// A command's work whose answer comes when it ends.
pub type Work = std::pin::Pin<Box<dyn Future<Output = Answer> + Send + 'static>>;

/// What running a command gives the connection to do.
pub enum Outcome {
    /// Answer now.
    Now(Answer),
    /// Answer when this ends: in the background, or only while the
    /// connection lasts ([`Answering::Watching`]).
    Later(Work),
    /// Answer now, then stop the daemon (the answer must go first).
    ThenShutDown { force: bool },
    /// Nothing: the agent's host answers.
    Sent,
}

/// The connection's side of a command: what it is and holds.
pub struct Caller<'a> {
    pub daemon: &'a Arc<dyn Daemon>,
    /// Its attachments, which `agent.attach` and `agent.detach` change.
    pub attached: &'a mut HashMap<String, AttachRole>,
    /// Where the host sends this connection's answers and events.
    pub subscriber: Sub,
    /// The command's `id`, for answers the host sends.
    pub id: Option<String>,
    /// Names this client in `permission_resolved.source`.
    pub source: &'static str,
    /// Who answers, for the approval history.
    pub answerer: Answerer,
    pub grant: Grant,
}

impl Caller<'_> {
    /// Whether this is a browser of a daemon in a remote mode: it may
    /// never start an agent without a sandbox.
    pub fn afar(&self) -> bool {
        self.source == "web" && self.daemon.registry().context.sandbox.remote
    }
}

/// Runs a registry command (a per-agent one goes through [`routed::run`]).
pub fn run(caller: Caller<'_>, message: ClientMessage) -> Outcome {
    match message {
        ClientMessage::AgentList(_)
        | ClientMessage::AgentStatus(_)
        | ClientMessage::AgentCreate(_)
        | ClientMessage::AgentAttach(_)
        | ClientMessage::AgentDetach(_)
        | ClientMessage::AgentTerminate(_)
        | ClientMessage::AgentKill(_)
        | ClientMessage::RuntimeList(_) => agent::run(caller, message),
        ClientMessage::DaemonShutdown(_)
        | ClientMessage::DaemonEnroll(_)
        | ClientMessage::DaemonSessions(_)
        | ClientMessage::DaemonStats(_)
        | ClientMessage::DaemonRevokeSession(_)
        | ClientMessage::DaemonDisconnect(_) => daemon::run(caller.daemon, message),
        ClientMessage::SubagentCreate(_)
        | ClientMessage::SubagentWait(_)
        | ClientMessage::SubagentSteer(_)
        | ClientMessage::SubagentRelaunch(_)
        | ClientMessage::SubagentStatus(_)
        | ClientMessage::SubagentStop(_) => subagent::run(&caller, message),
        ClientMessage::WorkspaceCreate(_)
        | ClientMessage::WorkspaceAttach(_)
        | ClientMessage::WorkspaceList(_)
        | ClientMessage::WorkspaceStatus(_)
        | ClientMessage::WorkspaceRetire(_)
        | ClientMessage::WorkspaceCommit(_)
        | ClientMessage::WorkspaceMerge(_)
        | ClientMessage::WorkspacePush(_) => {
            let afar = caller.afar();
            workspace::run(caller.daemon, message, afar)
        }
        ClientMessage::UsageGlobal(_)
        | ClientMessage::UsageAgent(_)
        | ClientMessage::UsageSession(_) => usage::run(caller.daemon.registry(), message),
        ClientMessage::ApprovalList(query) => approvals::list(caller.daemon.registry(), query),
        ClientMessage::SessionActivate(request) => session::activate(caller.daemon, request),
        ClientMessage::SandboxRevoke(request) => {
            let daemon = caller.daemon.clone();
            Outcome::Later(Box::pin(
                async move { ok(daemon.registry().revoke_host(request).await?) },
            ))
        }
        ClientMessage::SearchQuery(query) => search::query(caller.daemon, query),
        ClientMessage::ClientPresence(presence) => {
            caller.daemon.presence(caller.subscriber.id(), presence.visible);
            Outcome::Now(Ok(None))
        }
        ClientMessage::FleetWatch(request) => {
            caller.daemon.watch_fleet(caller.subscriber.id(), request.watch);
            let context = &caller.daemon.registry().context;
            let spend = context.budgets.daemon(crate::clock::now_ms());
            Outcome::Now(ok(context.fleet.now(spend)))
        }
        ClientMessage::BudgetList(_) | ClientMessage::BudgetSet(_) => budget::run(&caller, message),
        ClientMessage::NodeList(_) => {
            let nodes = caller.daemon.registry().context.nodes.list();
            Outcome::Now(ok(shard_protocol::node::NodeList { nodes }))
        }
        other => run_elsewhere(other),
    }
}

/// A command handed to a family that does not hold it: a mistake in the
/// routing above (per-agent commands go to [`routed::run`]), answered as
/// one rather than panicking.
fn run_elsewhere(message: ClientMessage) -> Outcome {
    Outcome::Now(Err(CommandError::WrongFamily(message.type_name()).into()))
}

/// The answer `data` for a success.
pub fn ok(data: impl serde::Serialize) -> Answer {
    serde_json::to_value(data).map(Some).map_err(|error| CommandError::Encode(error).into())
}

/// NOT_FOUND for an agent id.
pub fn not_found(agent_id: &str) -> WireError {
    AgentError::NoAgent(agent_id.to_owned()).into()
}

/// The wire error for a host that did not take a command.
pub fn refused_error(refused: Refused, agent_id: &str) -> WireError {
    refused.for_agent(agent_id).into()
}

/// A host that stopped before it answered.
pub fn host_gone() -> WireError {
    AgentError::HostGone.into()
}

#[cfg(test)]
mod tests {
    use shard_protocol::ErrorCode;

    use super::*;

    fn standing(role: Option<AttachRole>) -> Standing {
        Standing { role, ..Standing::default() }
    }

    #[test]
    fn the_rules_refuse_observers_changes_and_strangers_everything_but_redacted_reads() {
        let observer = standing(Some(AttachRole::Observer));
        let interactive = standing(Some(AttachRole::Interactive));
        let stranger = standing(None);
        let code = |attachment, standing| {
            authorize(attachment, "a", standing).map_err(|error| WireError::from(error).code)
        };
        assert_eq!(code(Attachment::Act, observer), Err(ErrorCode::PermissionDenied));
        assert_eq!(code(Attachment::Act, stranger), Err(ErrorCode::NotAttached));
        assert_eq!(code(Attachment::Act, interactive), Ok(Grant::Whole));
        assert_eq!(code(Attachment::Watch, observer), Ok(Grant::Whole));
        assert_eq!(code(Attachment::Watch, stranger), Err(ErrorCode::NotAttached));
        assert_eq!(code(Attachment::WatchOrRedacted, stranger), Ok(Grant::Redacted));
        assert_eq!(code(Attachment::Answer, observer), Err(ErrorCode::PermissionDenied));
        let delegate = Standing { delegate: true, ..observer };
        assert_eq!(code(Attachment::Answer, delegate), Ok(Grant::Whole));
        assert_eq!(code(Attachment::Stop, delegate), Ok(Grant::Whole));
        assert_eq!(code(Attachment::Stop, observer), Err(ErrorCode::PermissionDenied));
        assert_eq!(code(Attachment::Stop, stranger), Err(ErrorCode::NotAttached));
        let itself = Standing { is_the_agent: true, ..stranger };
        assert_eq!(code(Attachment::Act, itself), Ok(Grant::Whole));
    }

    #[test]
    fn an_answer_bound_to_its_call_answers_that_call_and_acts_on_nothing() {
        let bound = Standing { bound: true, ..standing(None) };
        let answer = ClientMessage::PermissionResponse(shard_protocol::agent::PermissionResponse {
            request_id: "perm-1".to_owned(),
            answer: shard_protocol::agent::PermissionAnswer::Decision(
                shard_protocol::agent::Decision::Allow,
            ),
            reason: None,
        });
        let browser = Door::default();
        assert_eq!(admit(&answer, browser, Some(("a", bound))).ok(), Some(Grant::Whole));
        let code = |message: &ClientMessage, standing| {
            admit(message, browser, Some(("a", standing)))
                .map_err(|error| WireError::from(error).code)
        };
        assert_eq!(code(&answer, standing(None)), Err(ErrorCode::NotAttached));
        let abort = ClientMessage::Abort(Default::default());
        assert_eq!(code(&abort, bound), Err(ErrorCode::NotAttached), "it answers, never acts");
        let watch = ClientMessage::ListModes(Default::default());
        assert_eq!(code(&watch, bound), Err(ErrorCode::NotAttached), "nor reads");
    }

    #[test]
    fn reach_is_part_of_the_rule() {
        let shutdown = ClientMessage::DaemonShutdown(Default::default());
        let browser = Door::default();
        let local = Door { local: true, an_agent: false };
        let refused = |message: &ClientMessage, door| {
            admit(message, door, None).map_err(|error| WireError::from(error).code).err()
        };
        assert_eq!(refused(&shutdown, browser), Some(ErrorCode::PermissionDenied));
        assert_eq!(refused(&shutdown, local), None);
        let query = ClientMessage::SearchQuery(shard_protocol::search::SearchQuery {
            query: "words".to_owned(),
            limit: None,
            agent_id: None,
        });
        let agent = Door { local: true, an_agent: true };
        assert_eq!(refused(&query, agent), Some(ErrorCode::PermissionDenied));
        assert_eq!(refused(&query, browser), None);
    }

    #[test]
    fn searching_transcripts_needs_no_attachment_and_is_not_for_agents() {
        let query = shard_protocol::search::SearchQuery {
            query: "words".to_owned(),
            limit: None,
            agent_id: Some("agent-1".to_owned()),
        };
        let search = rule(&ClientMessage::SearchQuery(query.clone()));
        assert_eq!(search.reach, Reach::People);
        assert_eq!(search.attachment, Attachment::None, "attaching, to read, needs none");
        assert_eq!(search.answering, Answering::Background, "it waits for the index");
        assert_eq!(subject(&ClientMessage::SearchQuery(query)), None, "`agent_id` only filters");
        let error = WireError::from(CommandError::NotForAgents("search.query"));
        assert_eq!(error.code, ErrorCode::PermissionDenied);
    }
}
