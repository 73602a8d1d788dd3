//! The roster: every agent the daemon lists, what each is doing now, which
//! did something while not on screen, and which parents the list folds.
//! It follows the registry events every connection receives
//! (`agent_spawned`, `agent_status_changed`, `agent_exited`,
//! `agent_activity`, `agent_usage`, `agent_sandbox`) and sends the
//! agent-wide commands (list, create, terminate, kill, and taking back a
//! host its sandbox was allowed).

use std::collections::{BTreeMap, BTreeSet};

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::ServerMessage;
use shard_protocol::agent::Empty;
use shard_protocol::identity::AgentIdentity;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{
    ActivityPhase, AgentActivity, AgentCreate, AgentCreateResult, AgentExited, AgentKill,
    AgentStatusChanged, AgentTarget, AgentsResult, RuntimeListResult, RuntimeQuery,
};
use shard_protocol::sandbox::{AgentSandbox, SandboxRequest, SandboxRevoke};
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState};
use shard_protocol::usage::AgentUsage;

use crate::link::{Link, Request};

/// Whether an agent in `status` waits for an answer from a person.
pub fn waiting(status: AgentStatus) -> bool {
    matches!(status, AgentStatus::WaitingForPermission | AgentStatus::WaitingForUi)
}

/// What an agent is doing, as its last `agent_activity` said.
#[derive(Debug, Clone, PartialEq)]
pub struct Doing {
    pub phase: ActivityPhase,
    pub tool_name: Option<String>,
}

/// What the agent list names that the page asks more about: the agents
/// waiting for an answer (their questions), and the parents (their jobs).
pub struct Listed {
    pub waiting: Vec<String>,
    pub parents: BTreeSet<String>,
}

/// `None` for an empty field.
pub fn given(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// What the new-agent form asks for; an empty field is the default.
pub struct NewAgent<'a> {
    pub cwd: &'a str,
    pub name: &'a str,
    pub model: &'a str,
    pub mode: &'a str,
    pub runtime: &'a str,
    /// The node it runs on; empty: the hub.
    pub node: &'a str,
    /// Narrower than config.toml's policy, or `None` to send nothing.
    pub sandbox: Option<SandboxRequest>,
}

#[derive(Clone, Copy)]
pub struct Roster {
    /// Every agent, in creation order.
    pub agents: RwSignal<Vec<AgentInfo>>,
    pub activity: RwSignal<BTreeMap<String, Doing>>,
    /// Agents that did something while not on screen.
    pub unread: RwSignal<BTreeSet<String>>,
    /// Parents whose children the agent list hides.
    pub collapsed: RwSignal<BTreeSet<String>>,
    /// The runtimes a new agent may run, by id (`runtime.list`): Shard's
    /// own first, then each configured one. Of the machine last asked
    /// about ([`Self::list_runtimes`]).
    pub runtimes: RwSignal<Vec<String>>,
    /// The machine whose runtimes were last asked for (empty: the hub): an
    /// answer about another is out of date.
    runtimes_of: RwSignal<String>,
    /// What the daemon says a new built-in agent gets: its default model,
    /// and a working directory to offer (`runtime.list`).
    pub defaults: RwSignal<(Option<String>, Option<String>)>,
    /// Where the new-agent form's last request stands.
    pub creation: RwSignal<Creation>,
    link: Link,
}

/// The new-agent form's request: its answer goes to the form (an error
/// beside the fields, the form closed on success), not to the page's
/// notice.
#[derive(Debug, Clone, PartialEq)]
pub enum Creation {
    Idle,
    Sent,
    Failed(String),
    Created,
}

impl Roster {
    pub fn new(link: Link) -> Self {
        Self {
            agents: RwSignal::new(Vec::new()),
            activity: RwSignal::new(BTreeMap::new()),
            unread: RwSignal::new(BTreeSet::new()),
            collapsed: RwSignal::new(BTreeSet::new()),
            runtimes: RwSignal::new(Vec::new()),
            runtimes_of: RwSignal::new(String::new()),
            defaults: RwSignal::new((None, None)),
            creation: RwSignal::new(Creation::Idle),
            link,
        }
    }

    pub fn list(&self) {
        self.link.send(ClientMessage::AgentList(Empty {}), None, Request::List);
    }

    /// Asks which runtimes a new agent may run on `node` (empty: the
    /// hub). Until the answer, only Shard's own agent is offered.
    pub fn list_runtimes(&self, node: &str) {
        if self.runtimes_of.get_untracked() != node {
            self.runtimes.set(Vec::new());
            self.runtimes_of.set(node.to_owned());
        }
        let query = RuntimeQuery { node: given(node) };
        let asked = Request::Runtimes { node: node.to_owned() };
        self.link.send(ClientMessage::RuntimeList(query), None, asked);
    }

    /// The answer about `node`'s runtimes: kept if it is still the machine
    /// asked about. A node that could not answer offers Shard's own only.
    pub fn runtimes_listed(&self, node: &str, response: &Response) {
        if self.runtimes_of.get_untracked() != node {
            return;
        }
        match response.data::<RuntimeListResult>() {
            Ok(listed) => {
                self.runtimes.set(listed.runtimes.into_iter().map(|runtime| runtime.id).collect());
                self.defaults.set((listed.default_model, listed.suggested_cwd));
            }
            Err(_) => self.runtimes.set(Vec::new()),
        }
    }

    pub fn create(&self, new: NewAgent<'_>) {
        let create = AgentCreate {
            cwd: new.cwd.trim().to_owned(),
            identity: AgentIdentity { name: given(new.name), ..AgentIdentity::default() },
            model: given(new.model),
            mode: given(new.mode),
            runtime: given(new.runtime),
            node: given(new.node),
            sandbox: new.sandbox,
            ..AgentCreate::default()
        };
        self.link.send(ClientMessage::AgentCreate(create), None, Request::Create);
    }

    pub fn terminate(&self, agent_id: String) {
        let target = AgentTarget { agent_id };
        self.link.send(ClientMessage::AgentTerminate(target), None, Request::Command);
    }

    pub fn kill(&self, agent_id: String) {
        // SIGTERM first, as the agent view's Kill (crate::screen).
        let kill = AgentKill { agent_id, force: None };
        self.link.send(ClientMessage::AgentKill(kill), None, Request::Command);
    }

    /// Takes back `host`, which a person allowed always for `agent_id`'s
    /// sandbox. The row follows the `agent_sandbox` every client gets.
    pub fn revoke(&self, agent_id: String, host: String) {
        let revoke = SandboxRevoke { agent_id, host };
        self.link.send(ClientMessage::SandboxRevoke(revoke), None, Request::Command);
    }

    /// An `agent_sandbox`: a host was granted or taken back.
    pub fn sandbox_changed(&self, changed: AgentSandbox) {
        self.update(&changed.agent_id, |agent| agent.sandbox = Some(changed.sandbox));
    }

    /// The node `agent_id` runs on (`None`: the hub). Before the list
    /// names it, its id says (`ID@NODE`).
    pub fn node_of(&self, agent_id: &str) -> Option<String> {
        let listed = self.agents.with_untracked(|agents| {
            agents.iter().find(|agent| agent.agent_id == agent_id).map(|agent| agent.node.clone())
        });
        listed.unwrap_or_else(|| agent_id.rsplit_once('@').map(|(_, node)| node.to_owned()))
    }

    /// Adds or replaces one agent, keeping creation order.
    pub fn upsert(&self, info: AgentInfo) {
        self.agents.update(|agents| {
            match agents.iter_mut().find(|known| known.agent_id == info.agent_id) {
                Some(known) => *known = info,
                None => {
                    agents.push(info);
                    crate::order::sort_by_rank(agents, |agent| {
                        (agent.created_at, agent.agent_id.clone())
                    });
                }
            }
        });
    }

    /// What a person calls `agent_id`: its name, else its id (untracked).
    pub fn name_of(&self, agent_id: &str) -> String {
        self.agents.with_untracked(|agents| {
            agents
                .iter()
                .find(|agent| agent.agent_id == agent_id)
                .and_then(|agent| agent.identity.name.clone())
                .unwrap_or_else(|| agent_id.to_owned())
        })
    }

    /// Where `agent_id` works (tracked).
    pub fn cwd_of(&self, agent_id: &str) -> Option<String> {
        self.place_of(agent_id).map(|(cwd, _)| cwd)
    }

    /// `agent_id`'s folder and the node it is on (`None`: the hub) (tracked).
    pub fn place_of(&self, agent_id: &str) -> Option<(String, Option<String>)> {
        self.agents.with(|agents| {
            let agent = agents.iter().find(|agent| agent.agent_id == agent_id)?;
            Some((agent.cwd.clone(), agent.node.clone()))
        })
    }

    /// Whether `agent_id` runs on the built-in `demo` model (tracked).
    pub fn on_demo_model(&self, agent_id: &str) -> bool {
        self.agents.with(|agents| {
            agents.iter().any(|agent| {
                agent.agent_id == agent_id
                    && agent.model.as_deref().is_some_and(|model| model.starts_with("demo"))
            })
        })
    }

    /// `agent_id`'s status as the registry last said (untracked).
    pub fn status_of(&self, agent_id: &str) -> Option<AgentStatus> {
        self.agents.with_untracked(|agents| {
            agents.iter().find(|agent| agent.agent_id == agent_id).map(|agent| agent.status)
        })
    }

    /// Whether `agent_id` runs an agent that is not Shard's own (tracked):
    /// one that cannot be steered mid-turn.
    pub fn is_foreign(&self, agent_id: &str) -> bool {
        self.agents.with(|agents| {
            agents.iter().any(|agent| {
                agent.agent_id == agent_id
                    && agent.runtime.as_deref().is_some_and(|runtime| runtime != "shard")
            })
        })
    }

    /// Changes `agent_id`'s row, if the page knows it.
    fn update(&self, agent_id: &str, change: impl FnOnce(&mut AgentInfo)) {
        self.agents.update(|agents| {
            if let Some(agent) = agents.iter_mut().find(|agent| agent.agent_id == agent_id) {
                change(agent);
            }
        });
    }

    /// `agent_id` is on screen: nothing of it is unread.
    pub fn mark_read(&self, agent_id: &str) {
        self.unread.update(|unread| {
            unread.remove(agent_id);
        });
    }

    /// The answer to `agent.list`: the whole list, and what it names.
    pub fn listed(&self, response: &Response) -> Option<Listed> {
        let AgentsResult { agents } = response.data::<AgentsResult>().ok()?;
        let waiting = agents
            .iter()
            .filter(|agent| waiting(agent.status))
            .map(|agent| agent.agent_id.clone())
            .collect();
        let parents = crate::order::set_of(
            agents.iter().filter_map(|agent| agent.identity.parent_agent_id.clone()),
        );
        self.agents.set(agents);
        Some(Listed { waiting, parents })
    }

    /// The answer to `agent.create`: the new agent, to open.
    pub fn created(&self, response: &Response) -> Option<String> {
        let outcome = response
            .data::<AgentCreateResult>()
            .map(|created| created.agent_id)
            .map_err(|error| format!("Could not create the agent: {}", error.message));
        self.answered_form(outcome)
    }

    /// An answer to a request that makes an agent: the form's, if it sent
    /// one, else the page's notice says what went wrong.
    pub fn answered_form(&self, outcome: Result<String, String>) -> Option<String> {
        let from_form = self.creation.with_untracked(|creation| *creation == Creation::Sent);
        match outcome {
            Ok(agent_id) => {
                self.link.notice.set(None);
                if from_form {
                    self.creation.set(Creation::Created);
                }
                Some(agent_id)
            }
            Err(why) if from_form => {
                self.creation.set(Creation::Failed(why));
                None
            }
            Err(why) => {
                self.link.tell(why);
                None
            }
        }
    }

    /// An `agent_status_changed`: the row follows; a (re)started process
    /// knows its model and mode, so the list is asked again; a turn that
    /// ended off screen leaves something to read.
    pub fn status_changed(&self, changed: &AgentStatusChanged, on_screen: bool) {
        let known = self.agents.with_untracked(|agents| {
            agents
                .iter()
                .find(|agent| agent.agent_id == changed.agent_id)
                .map(|agent| (agent.status, agent.runtime_state))
        });
        let started = changed.runtime_state == RuntimeState::Running
            && known.is_some_and(|(_, runtime)| runtime != changed.runtime_state);
        if started {
            self.list();
        }
        let was_busy = known
            .is_some_and(|(status, _)| !matches!(status, AgentStatus::Idle | AgentStatus::Unknown));
        let settled = matches!(changed.status, AgentStatus::Idle | AgentStatus::Error);
        if !on_screen && was_busy && settled {
            self.unread.update(|unread| {
                unread.insert(changed.agent_id.clone());
            });
        }
        self.update(&changed.agent_id, |agent| {
            agent.status = changed.status;
            agent.runtime_state = changed.runtime_state;
        });
    }

    pub fn exited(&self, exited: &AgentExited) {
        self.update(&exited.agent_id, |agent| agent.runtime_state = exited.runtime_state);
    }

    pub fn activity_changed(&self, activity: AgentActivity) {
        let doing = Doing { phase: activity.phase, tool_name: activity.tool_name };
        self.activity.update(|map| {
            map.insert(activity.agent_id, doing);
        });
    }

    /// `agent_id`'s process stopped: whatever it was doing ended.
    pub fn runtime_gone(&self, agent_id: &str) {
        self.activity.update(|activity| {
            activity.remove(agent_id);
        });
    }

    /// An agent's rollup changed: its row shows the new totals, with the
    /// context size its own `usage` events keep.
    pub fn usage_changed(&self, event: &AgentUsage) {
        self.update(&event.agent_id, |agent| {
            let context = agent.usage.as_ref().and_then(|usage| usage.context_tokens);
            let mut usage = event.usage.as_usage();
            usage.context_tokens = context;
            agent.usage = Some(usage);
        });
    }

    /// An event of the agent on screen that its row shows too.
    pub fn agent_event(&self, agent_id: &str, message: &ServerMessage) {
        match message {
            ServerMessage::ModeChanged(changed) => {
                self.update(agent_id, |agent| agent.mode = Some(changed.mode.clone()))
            }
            ServerMessage::ModelChanged(changed) => {
                self.update(agent_id, |agent| agent.model = Some(changed.active.id.clone()))
            }
            // The totals come from the daemon's rollup (`agent_usage`), which
            // every tab gets; this is how full the context is.
            ServerMessage::Usage(usage) => self.update(agent_id, |agent| {
                if let Some(total) = agent.usage.as_mut() {
                    total.context_tokens = usage.context_tokens.or(total.context_tokens);
                }
            }),
            _ => {}
        }
    }
}
