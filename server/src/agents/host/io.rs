//! What the host touches besides the agent's process: the connections
//! attached to it, its journal, its history of questions, and the daemon's
//! shared books and broadcasts. The parts decide; the host hands what they
//! decided to [`Io`], which carries it out and decides nothing.

use std::collections::HashSet;
use std::sync::Arc;

use shard_protocol::budget::BudgetUpdated;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::AttachRole;
use shard_protocol::usage::{AgentUsage, TurnState};
use shard_protocol::{Envelope, ServerMessage};

use super::attachments::Attachments;
use super::handle::Context;
use super::journal::Journal;
use super::out::Out;
use crate::agents::approvals::ApprovalLog;
use crate::agents::error::AgentError;
use crate::agents::manifest::Manifest;
use crate::agents::{NoticeAgent, Sub, SubscriberId, Wire, now_ms};

/// The most bytes of missed events one resume sends; more, and a `sync`
/// is smaller. Half a connection's default outbox (4 MiB, `clients`), so
/// that live events still fit behind them.
const RESUME_BUDGET: usize = 2 * 1024 * 1024;

pub(super) struct Io {
    pub context: Arc<Context>,
    agent_id: String,
    name: Option<String>,
    attached: Attachments,
    /// Every per-agent event, numbered and kept for resumes.
    journal: Journal,
    /// Every question asked and who answered it.
    approvals: ApprovalLog,
}

impl Io {
    pub fn new(context: Arc<Context>, manifest: &Manifest) -> Self {
        let agent_dir = crate::agents::manifest::agent_dir(&context.home, &manifest.agent_id);
        Self {
            journal: Journal::new(agent_dir, context.journal),
            approvals: ApprovalLog::new(&context.home, &manifest.agent_id),
            context,
            agent_id: manifest.agent_id.clone(),
            name: manifest.identity.name.clone(),
            attached: Attachments::default(),
        }
    }

    pub fn attached_nobody(&self) -> bool {
        self.attached.is_empty()
    }

    /// Nobody anywhere in the hierarchy answers this agent's questions.
    pub fn no_responders(&self) -> bool {
        self.context.delegation.responders(&self.agent_id).is_empty()
    }

    /// The events a client at `after` missed, when they are all kept and
    /// small enough to resend; `None`: it needs a `sync`. Not while a
    /// descendant's question is open: it lives in that agent's journal,
    /// and only a sync carries it.
    pub fn missed(&mut self, after: Option<u64>) -> Option<Vec<Wire>> {
        let after = after
            .filter(|_| self.context.delegation.delegated_pending(&self.agent_id).is_empty())?;
        self.journal.since(after, RESUME_BUDGET)
    }

    /// §6.4: answers `agent.attach` with `result`, sends what the client
    /// needs to catch up (its `sync`, or the events it missed), then
    /// attaches it for live events (again: its role changes; an observer
    /// never answers).
    pub fn join(
        &mut self,
        subscriber: Sub,
        role: AttachRole,
        id: Option<String>,
        result: shard_protocol::orchestrator::AttachResult,
        catch_up: Vec<Wire>,
    ) {
        self.respond(&subscriber, id, false, Response::ok("agent.attach", result));
        for event in catch_up {
            subscriber.push(event);
        }
        if role == AttachRole::Interactive {
            self.context.delegation.attach(&self.agent_id, &subscriber);
        } else {
            self.context.delegation.detach(&self.agent_id, subscriber.id());
        }
        self.attached.insert(subscriber, role);
    }

    /// Detaches `subscriber`; its role, if it was attached.
    pub fn detach(&mut self, subscriber: SubscriberId) -> Option<AttachRole> {
        let role = self.attached.remove(subscriber)?;
        self.context.delegation.detach(&self.agent_id, subscriber);
        Some(role)
    }

    /// A per-agent event (one serialized line) numbered, recorded in the
    /// journal, and tagged with the agent: it is spliced, never decoded and
    /// encoded again.
    pub fn stamp(&mut self, line: &str) -> Wire {
        self.journal.stamp(&self.agent_id, line)
    }

    pub fn last_seq(&mut self) -> u64 {
        self.journal.last_seq()
    }

    /// Every cursor given out so far gets a `sync` from now on.
    pub fn start_over(&mut self) {
        self.journal.start_over();
    }

    /// Sends bytes to every attached connection.
    pub fn fan_out(&self, bytes: &Wire) {
        self.attached.fan_out(bytes);
    }

    pub fn respond(&self, to: &Sub, id: Option<String>, tagged: bool, response: Response) {
        let agent_id = tagged.then(|| self.agent_id.clone());
        let envelope =
            Envelope { id, agent_id, seq: None, message: ServerMessage::Response(response) };
        to.push(Wire::from(envelope.to_json()));
    }

    /// Sends a question (or its end) to every attachment of this agent and
    /// to the responders it is delegated to, each connection once.
    fn deliver(&self, bytes: &Wire) {
        let mut sent = HashSet::new();
        let responders = self.context.delegation.responders(&self.agent_id);
        for subscriber in self.attached.subscribers().chain(responders.iter()) {
            if sent.insert(subscriber.id()) {
                subscriber.push(bytes.clone());
            }
        }
    }

    fn notice_agent(&self) -> NoticeAgent<'_> {
        NoticeAgent { agent_id: &self.agent_id, name: self.name.as_deref() }
    }

    /// The daemon's books hear of one of the agent's events, in session
    /// `session_id`: the search index, the usage book and, for a failed
    /// turn, those away. A call that changed the agent's total is told to
    /// every client.
    pub fn books(&self, session_id: &str, message: &ServerMessage) -> Vec<Out> {
        let (agent, usage) = (self.agent_id.as_str(), &self.context.usage);
        match message {
            // A message is in the session log once it completed, and a
            // turn's prompt once the turn ended: the index reads them.
            ServerMessage::MessageComplete(_) => self.context.search.touch(agent, session_id),
            ServerMessage::TurnEnd(end) => {
                self.context.search.touch(agent, session_id);
                usage.turn_ended(agent, Some(&end.turn_id), TurnState::Ended, now_ms());
            }
            ServerMessage::TurnStart(start) => {
                usage.turn_started(agent, session_id, &start.turn_id, now_ms())
            }
            ServerMessage::Error(error) => {
                self.context.notices.failed(&self.notice_agent(), error.code.as_str())
            }
            ServerMessage::Usage(call) => {
                let mut out = Vec::new();
                if let Some(usage) = usage.call(agent, session_id, call, now_ms()) {
                    let event = AgentUsage { agent_id: agent.to_owned(), usage };
                    out.extend([Out::Publish, Out::Broadcast(ServerMessage::AgentUsage(event))]);
                }
                // Budgets passing 80 % or their cap, for every client.
                let changed = self.context.budgets.after_call(agent, now_ms());
                out.extend(changed.into_iter().map(|budget| {
                    Out::Broadcast(ServerMessage::BudgetUpdated(BudgetUpdated { budget }))
                }));
                return out;
            }
            _ => {}
        }
        Vec::new()
    }

    /// The process ended: a turn it was in ended without its `turn_end`.
    pub fn interrupted(&self) {
        self.context.usage.turn_ended(&self.agent_id, None, TurnState::Interrupted, now_ms());
    }

    /// The agent's sandbox as `config.toml` and its grants describe it now;
    /// a node's agent's, as its node said when the hub listed it.
    pub fn sandbox(&self, manifest: &Manifest) -> Option<shard_protocol::sandbox::SandboxInfo> {
        if let Some(remote) = &manifest.remote {
            return remote.sandbox.clone();
        }
        let (id, runtime) = (&manifest.agent_id, manifest.runtime_id());
        self.context.sandbox.describe(id, runtime, manifest.sandbox)
    }

    /// `sandbox.revoke`: takes `host` back from the agent's grants.
    pub fn revoke(&self, host: &shard_platform::sandbox::HostPort) -> Result<(), AgentError> {
        match crate::sandbox::grants::revoke(&self.context.home, &self.agent_id, host) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(AgentError::NotGranted(host.to_string())),
            Err(error) => Err(AgentError::GrantsUnwritten(error.to_string())),
        }
    }

    /// Carries out `out`, or hands it back when it needs the host's parts
    /// (its own command to the agent, the projection).
    pub fn perform(&mut self, out: Out) -> Option<Out> {
        match out {
            Out::Answer(asker, answer) => asker(&answer),
            Out::Event(line) => {
                let event = self.stamp(&line);
                self.fan_out(&event);
            }
            Out::Question(line) => {
                let event = self.stamp(&line);
                self.deliver(&event);
            }
            Out::Deliver(event) => self.deliver(&event),
            Out::Reannounce(event) => {
                for subscriber in self.context.delegation.responders(&self.agent_id) {
                    subscriber.push(event.clone());
                }
            }
            Out::Respond { to, id, tagged, response } => self.respond(&to, id, tagged, response),
            Out::Broadcast(message) => {
                let bytes = Wire::from(Envelope::new(message).to_json());
                self.context.broadcast.broadcast(&bytes);
            }
            Out::Pending(requests) => self.context.delegation.set_pending(&self.agent_id, requests),
            Out::Asked(record) => self.approvals.asked(record),
            Out::Resolved { request_id, outcome, by } => {
                self.approvals.resolved(&request_id, now_ms(), outcome, by)
            }
            Out::Waiting(request) => self.context.notices.asked(&self.notice_agent(), &request),
            Out::Settled(request_id) => self.context.notices.settled(&self.agent_id, &request_id),
            host @ (Out::Send(..)
            | Out::Publish
            | Out::Activity
            | Out::RefreshSandbox
            | Out::Withdraw(_)) => {
                return Some(host);
            }
        }
        None
    }

    /// Writes out what this turn of the loop journaled.
    pub fn flush(&mut self) {
        self.journal.flush();
    }

    /// Flush, record a clean stop, close the journal.
    pub fn close(&mut self) {
        self.journal.close();
    }

    /// Gives back what only an awake host needs.
    pub fn shed(&mut self) {
        self.journal.close();
        self.context.usage.forget_turns(&self.agent_id);
        self.attached.shed();
    }
}
