//! The registry of durable agents: loads every manifest at start (each agent
//! listed, its process stopped until needed), creates agents, and answers the
//! registry commands of §10.1 that are not about one attachment.

use std::collections::HashMap;
use std::sync::Arc;

use shard_platform::config::Config;
use shard_platform::session_view;
use shard_protocol::error::ErrorCode;
use shard_protocol::orchestrator::{
    AgentCreate, AgentCreateResult, AgentSpawned, AgentStatusQuery, AgentsResult, LaunchPolicy,
    RuntimeInfo, SessionActivate, SessionActivateResult,
};
use shard_protocol::sandbox::SandboxMode;
use shard_protocol::types::AgentInfo;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::sync::oneshot;

use super::checks::{alias_problem, runtime_of, validate_cwd};
use super::error::AgentError;
use super::host::{Context, Host, HostCommand, ShutdownMode};
use super::hosts::{Hosts, Refused};
use super::manifest::{MANIFEST_VERSION, Manifest};

pub struct Registry {
    pub context: Arc<Context>,
    hosts: Arc<Hosts>,
    /// Serializes the checks and the manifest write of a creation, so two
    /// adoptions of one session cannot race. Held for milliseconds, never
    /// while a process starts.
    creating: tokio::sync::Mutex<()>,
    /// Every agent's manifest (written once, never changed), for what the
    /// job coordinator needs of parents and children.
    manifests: std::sync::Mutex<HashMap<String, Manifest>>,
}

impl Registry {
    /// Every agent in `$SHARD_HOME/agents`, listed, dormant, its process
    /// stopped until needed.
    pub fn load(context: Arc<Context>) -> Self {
        let hosts = Arc::new(Hosts::default());
        let now = tokio::time::Instant::now();
        let mut manifests = HashMap::new();
        for manifest in Manifest::load_all(&context.home) {
            context.usage.load(&manifest.agent_id);
            manifests.insert(manifest.agent_id.clone(), manifest.clone());
            hosts.insert(Box::new(Host::dormant(context.clone(), manifest, now)));
        }
        Self {
            context,
            hosts,
            creating: tokio::sync::Mutex::new(()),
            manifests: std::sync::Mutex::new(manifests),
        }
    }

    fn manifests(&self) -> std::sync::MutexGuard<'_, HashMap<String, Manifest>> {
        self.manifests.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn manifest(&self, agent_id: &str) -> Option<Manifest> {
        self.manifests().get(agent_id).cloned()
    }

    /// The agents whose parent is `parent`, oldest first.
    pub fn children(&self, parent: &str) -> Vec<Manifest> {
        let mut children: Vec<Manifest> = self
            .manifests()
            .values()
            .filter(|manifest| manifest.identity.parent_agent_id.as_deref() == Some(parent))
            .cloned()
            .collect();
        children.sort_by(|a, b| (a.created_at, &a.agent_id).cmp(&(b.created_at, &b.agent_id)));
        children
    }

    /// Every agent and the session it runs now, for the search index.
    pub fn owners(&self) -> Vec<crate::search::Owner> {
        self.manifests()
            .values()
            .map(|manifest| crate::search::Owner {
                agent_id: manifest.agent_id.clone(),
                session_id: manifest.session_id.clone(),
                created_at: manifest.created_at,
            })
            .collect()
    }

    pub fn contains(&self, agent_id: &str) -> bool {
        self.hosts.contains(agent_id)
    }

    pub fn info(&self, agent_id: &str) -> Option<AgentInfo> {
        self.hosts.info(agent_id).map(|info| self.measured(info))
    }

    /// `info` with what its processes use now, if any run.
    fn measured(&self, mut info: AgentInfo) -> AgentInfo {
        info.resources = self.context.fleet.resources(&info.agent_id);
        info
    }

    /// Queues a command for an agent without waiting, waking it if needed.
    pub fn send(&self, agent_id: &str, command: HostCommand) -> Result<(), Refused> {
        self.hosts.send(agent_id, command)
    }

    /// Queues a command for an agent, waiting for room in its queue.
    pub async fn send_waiting(&self, agent_id: &str, command: HostCommand) -> Result<(), Refused> {
        self.hosts.send_waiting(agent_id, command).await
    }

    /// Where the fleet governor's orders go.
    pub fn governed(&self) -> Arc<dyn super::fleet::Governed> {
        self.hosts.clone()
    }

    /// Agents whose host is awake: doing something, or attached.
    pub fn awake(&self) -> usize {
        self.hosts.awake()
    }

    pub fn list(&self) -> Vec<AgentInfo> {
        let mut agents: Vec<AgentInfo> =
            self.hosts.list().into_iter().map(|info| self.measured(info)).collect();
        agents.sort_by(|a, b| (a.created_at, &a.agent_id).cmp(&(b.created_at, &b.agent_id)));
        agents
    }

    /// `agent.create`: validate everything, write the manifest, start the
    /// process and wait until it is ready. Creations run side by side: only
    /// the checks and the manifest write are one at a time.
    /// `afar`: asked by a browser of a daemon in a remote mode, which may
    /// never start an agent without a sandbox.
    pub async fn create(&self, request: AgentCreate, afar: bool) -> Result<String, AgentError> {
        if let Some(node) = request.node.clone() {
            return self.create_on(&node, request, afar).await;
        }
        let mut info = {
            let _one_at_a_time = self.creating.lock().await;
            self.register(&request, None, afar).await?
        };
        let agent_id = info.agent_id.clone();
        // Announced first, then its process starts (agent_status_changed).
        info.runtime_state = shard_protocol::types::RuntimeState::Starting;
        self.announce(info);
        let (reply, started) = oneshot::channel();
        let _ = self.send_waiting(&agent_id, HostCommand::Start { reply }).await;
        match started.await {
            Ok(Ok(())) => Ok(agent_id),
            Ok(Err(error)) if error.code == ErrorCode::SandboxUnavailable => {
                Err(AgentError::SandboxUnavailable(error.message))
            }
            // The identity stays: a retry (attach or new work) starts it again.
            Ok(Err(error)) => Err(AgentError::NotStarted { agent_id, why: error.message }),
            Err(_) => Err(AgentError::HostGoneStarting),
        }
    }

    /// `agent.create` with a `node`: the node makes the agent, as it makes
    /// any a local client asks for (its runtimes, paths, sandbox and
    /// limits), and the hub lists it under its node; from `afar`,
    /// contained ([`Registry::ask_node`]).
    async fn create_on(
        &self,
        node: &str,
        mut request: AgentCreate,
        afar: bool,
    ) -> Result<String, AgentError> {
        self.upstream_of(node)?;
        // A parent must be the node's own agent, named there by its id there.
        if let Some(parent) = request.identity.parent_agent_id.take() {
            match shard_platform::nodes::split(&parent) {
                Some((on, remote)) if on == node => {
                    request.identity.parent_agent_id = Some(remote.to_owned());
                }
                _ => return Err(AgentError::NoAgent(parent)),
            }
        }
        request.node = None;
        let asked = request.sandbox.as_ref().and_then(|sandbox| sandbox.mode);
        let make = |mode: Option<SandboxMode>| {
            let mut request = request.clone();
            if let Some(mode) = mode {
                request.sandbox.get_or_insert_with(Default::default).mode = Some(mode);
            }
            ClientMessage::AgentCreate(request)
        };
        let deadline = crate::upstream::CALL_DEADLINE;
        let made = self
            .ask_node(node, afar, asked, make, deadline)
            .await?
            .map_err(|error| refused_by(node, error))?;
        let made: AgentCreateResult = serde_json::from_value(made.unwrap_or_default())
            .map_err(|error| AgentError::NodeUnreadable(error.to_string()))?;
        self.list_made(node, &made.agent_id).await
    }

    /// A command that starts an agent, sent to `node`: made by `make` as
    /// asked (`None`) or with the sandbox mode given. Asked from `afar`,
    /// the agent is contained whatever the node's own policy (the hub is
    /// the node's local client, so the node's rule for browsers from afar
    /// cannot tell): `off` is refused, and with no mode asked, the widest
    /// the node's policy allows is tried, then narrower. The node's answer
    /// (waited for as long as `deadline`), or why it could not be asked.
    pub async fn ask_node(
        &self,
        node: &str,
        afar: bool,
        asked: Option<SandboxMode>,
        make: impl Fn(Option<SandboxMode>) -> ClientMessage,
        deadline: std::time::Duration,
    ) -> Result<crate::upstream::Outcome, AgentError> {
        let upstream = self.upstream_of(node)?;
        Ok(match (afar, asked) {
            (true, Some(SandboxMode::Off)) => return Err(AgentError::UnsandboxedFromAfar),
            // A narrowing the node refuses as wider than its own is tried
            // narrower.
            (true, None) => {
                let mut made = Ok(None);
                for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
                    made = upstream.call_within(None, make(Some(mode)), deadline).await;
                    if !matches!(&made, Err(error) if error.code == ErrorCode::PermissionDenied) {
                        break;
                    }
                }
                made
            }
            _ => upstream.call_within(None, make(None), deadline).await,
        })
    }

    /// An agent `node` just made, as `made` there, listed here: its id
    /// here.
    pub async fn list_made(&self, node: &str, made: &str) -> Result<String, AgentError> {
        let query = AgentStatusQuery { agent_id: Some(made.to_owned()) };
        let listed = self.call_node(node, ClientMessage::AgentStatus(query)).await?;
        let listed: AgentsResult = serde_json::from_value(listed.unwrap_or_default())
            .map_err(|error| AgentError::NodeUnreadable(error.to_string()))?;
        let Some(info) = listed.agents.into_iter().find(|info| info.agent_id == made) else {
            return Err(AgentError::NodeUnreadable(format!("no agent {made} listed")));
        };
        self.adopt(node, vec![info]).await;
        let agent_id = shard_platform::nodes::qualified(node, made);
        if self.contains(&agent_id) {
            return Ok(agent_id);
        }
        if self.node_agents(node) >= super::nodes::MAX_AGENTS {
            return Err(AgentError::NodeFull { node: node.to_owned(), made: made.to_owned() });
        }
        Err(AgentError::NodeUnreadable(format!("agent {made} was not listed")))
    }

    /// The connection to `node` now.
    fn upstream_of(&self, node: &str) -> Result<Arc<crate::upstream::Upstream>, AgentError> {
        let Some(link) = self.context.nodes.get(node) else {
            return Err(AgentError::NoNode(node.to_owned()));
        };
        let upstream = link.watch().borrow().clone();
        upstream.ok_or_else(|| AgentError::NodeOffline(link.offline_reason()))
    }

    /// `message` sent to `node` as one of its local clients: the data of
    /// its answer.
    pub async fn call_node(
        &self,
        node: &str,
        message: ClientMessage,
    ) -> Result<Option<serde_json::Value>, AgentError> {
        let upstream = self.upstream_of(node)?;
        upstream.call(None, message).await.map_err(|error| refused_by(node, error))
    }

    /// Where a node's agent lives, if `agent_id` is one: its link, and its
    /// id there.
    pub fn remote(&self, agent_id: &str) -> Option<(Arc<super::nodes::Link>, String)> {
        let remote = self.manifest(agent_id)?.remote?;
        let link = self.context.nodes.link(&remote.node)?;
        Some((link, remote.agent_id))
    }

    /// A registry command about a node's agent, sent to its node as the
    /// node's own (`agent.terminate`, `agent.kill`: the agent is the
    /// node's to stop); its answer's data.
    pub async fn on_node(
        &self,
        agent_id: &str,
        message: impl FnOnce(String) -> ClientMessage,
    ) -> Result<Option<serde_json::Value>, AgentError> {
        let Some((link, remote)) = self.remote(agent_id) else {
            return Err(AgentError::NoAgent(agent_id.to_owned()));
        };
        let Some(upstream) = link.watch().borrow().clone() else {
            return Err(AgentError::NodeOffline(link.offline_reason()));
        };
        upstream.call(None, message(remote)).await.map_err(|error| refused_by(link.id(), error))
    }

    /// Lists each of `node`'s agents not listed yet, under its node: a
    /// manifest (its copy of the session empty until a generation reads
    /// the node's) and a dormant host, announced to every client. An agent
    /// the node has from another node, or under an id that is not plain,
    /// is left out: trust does not chain.
    pub async fn adopt(&self, node: &str, agents: Vec<AgentInfo>) {
        let _one_at_a_time = self.creating.lock().await;
        let mut held = self.node_agents(node);
        for info in agents {
            if info.node.is_some() || !super::nodes::link::plain_id(&info.agent_id) {
                continue;
            }
            let agent_id = shard_platform::nodes::qualified(node, &info.agent_id);
            let said =
                HostCommand::NodeSaid { status: info.status, runtime_state: info.runtime_state };
            let sandbox = info.sandbox.clone().map(super::nodes::link::bounded_sandbox);
            if !self.contains(&agent_id) {
                if held >= super::nodes::MAX_AGENTS {
                    let most = super::nodes::MAX_AGENTS;
                    tracing::warn!(
                        node,
                        most,
                        "a node lists more agents than the hub keeps; the rest are left out"
                    );
                    break;
                }
                held += 1;
                let info = super::nodes::link::bounded(info);
                match self.register_remote(node, agent_id.clone(), info).await {
                    Ok(info) => self.announce(info),
                    Err(error) => {
                        tracing::error!(node, %error, "cannot list a node's agent");
                        continue;
                    }
                }
            }
            // As the node has it now: a new host starts idle and stopped,
            // a known one (the link back, the hub restarted) shows what the
            // hub last saw.
            let _ = self.send(&agent_id, said);
            if let Some(sandbox) = sandbox {
                let _ = self.send(&agent_id, HostCommand::NodeSandbox(sandbox));
            }
        }
    }

    /// How many of `node`'s agents the hub holds.
    fn node_agents(&self, node: &str) -> usize {
        let manifests = self.manifests();
        let on = |manifest: &&Manifest| manifest.remote.as_ref().is_some_and(|r| r.node == node);
        manifests.values().filter(on).count()
    }

    async fn register_remote(
        &self,
        node: &str,
        agent_id: String,
        info: AgentInfo,
    ) -> Result<AgentInfo, AgentError> {
        let home = &self.context.home;
        let model = info.model.clone().unwrap_or_else(|| info.runtime.clone().unwrap_or_default());
        let mode = info.mode.clone().unwrap_or_else(|| shard_platform::modes::BUILD.to_owned());
        let session_id = session_view::create(home, &info.cwd, &model, &mode)
            .await
            .map_err(AgentError::SessionCreate)?;
        let mut identity = info.identity;
        identity.parent_agent_id = identity
            .parent_agent_id
            .filter(|parent| super::nodes::link::plain_id(parent))
            .map(|parent| shard_platform::nodes::qualified(node, &parent));
        let manifest = Manifest {
            version: MANIFEST_VERSION,
            agent_id,
            identity,
            cwd: info.cwd,
            model: info.model,
            mode: info.mode,
            session_id,
            created_at: info.created_at,
            runtime: info.runtime,
            remote: Some(super::manifest::Remote {
                node: node.to_owned(),
                agent_id: info.agent_id,
                sandbox: info.sandbox,
            }),
            ..Manifest::default()
        };
        manifest.save(home).map_err(AgentError::ManifestWrite)?;
        self.manifests().insert(manifest.agent_id.clone(), manifest.clone());
        let host = Host::dormant(self.context.clone(), manifest, tokio::time::Instant::now());
        let info = host.info();
        self.hosts.insert(Box::new(host));
        Ok(info)
    }

    fn announce(&self, info: AgentInfo) {
        let spawned = AgentSpawned { agent_id: info.agent_id.clone(), info };
        self.context.broadcast.broadcast(&super::Wire::from(
            Envelope::new(ServerMessage::AgentSpawned(spawned)).to_json(),
        ));
    }

    /// Managed children (a job's): each checked and written under its
    /// preallocated id, listed and announced, its process stopped until its
    /// run starts it. Stops at the first that cannot be made (the ones
    /// before it stay: identities are never deleted).
    pub async fn materialize(
        &self,
        children: Vec<(String, AgentCreate)>,
    ) -> Result<Vec<AgentInfo>, AgentError> {
        let _one_at_a_time = self.creating.lock().await;
        let mut made = Vec::new();
        for (agent_id, request) in children {
            let info = self.register(&request, Some(agent_id), false).await?;
            self.announce(info.clone());
            made.push(info);
        }
        Ok(made)
    }

    /// Checks a creation, writes its manifest and lists its host.
    async fn register(
        &self,
        request: &AgentCreate,
        agent_id: Option<String>,
        afar: bool,
    ) -> Result<AgentInfo, AgentError> {
        let home = self.context.home.clone();
        let cwd = validate_cwd(&request.cwd, &home)?;
        let config = Config::load(&home).map_err(AgentError::Config)?;
        let runtime = runtime_of(request, &config)?;
        let managed = self.managed_fields(request)?;
        let sandbox = self.sandbox_of(request, runtime.as_deref(), &config, afar)?;
        let session_id = match &request.session_id {
            Some(session_id) => self.adoptable(session_id)?,
            None => {
                // Shard's record of an ACP agent's session names the
                // runtime as its model until the agent says which it uses.
                let (model, mode) = match &runtime {
                    Some(runtime) => (runtime.clone(), "default".to_owned()),
                    None => (
                        request.model.clone().unwrap_or_else(|| config.default_model.clone()),
                        managed
                            .mode
                            .clone()
                            .unwrap_or_else(|| shard_platform::modes::BUILD.to_owned()),
                    ),
                };
                session_view::create(&home, &cwd, &model, &mode)
                    .await
                    .map_err(AgentError::SessionCreate)?
            }
        };
        let manifest = Manifest {
            version: MANIFEST_VERSION,
            agent_id: agent_id.unwrap_or_else(|| format!("agent-{}", crate::id::random_hex())),
            identity: request.identity.clone(),
            cwd,
            model: request.model.clone(),
            mode: managed.mode.clone(),
            session_id,
            created_at: crate::clock::now_ms(),
            depth: managed.depth,
            launch_policy: managed.launch_policy,
            tools: managed.tools,
            system_prompt: request.system_prompt.clone(),
            headless_policy: request.headless_policy,
            names: request.names.clone(),
            runtime,
            sandbox,
            remote: None,
        };
        manifest.save(&home).map_err(AgentError::ManifestWrite)?;
        self.manifests().insert(manifest.agent_id.clone(), manifest.clone());
        let host = Host::dormant(self.context.clone(), manifest, tokio::time::Instant::now());
        let info = host.info();
        self.hosts.insert(Box::new(host));
        Ok(info)
    }

    /// Whether an agent asking for `sandbox` (its `runtime`'s, `None`:
    /// Shard's own) may start here, from `afar` or not, as `agent.create`
    /// checks it: what a workspace checks before git makes anything.
    pub fn launchable(
        &self,
        runtime: Option<String>,
        sandbox: Option<shard_protocol::sandbox::SandboxRequest>,
        afar: bool,
    ) -> Result<(), AgentError> {
        let request = AgentCreate { runtime, sandbox, ..AgentCreate::default() };
        let config = Config::load(&self.context.home).map_err(AgentError::Config)?;
        let runtime = runtime_of(&request, &config)?;
        self.sandbox_of(&request, runtime.as_deref(), &config, afar).map(drop)
    }

    /// The sandbox `request` asks for, never wider than its parent's nor
    /// than config.toml's, and one this machine can make; off only when
    /// config.toml says so and the ask is not from afar.
    fn sandbox_of(
        &self,
        request: &AgentCreate,
        runtime: Option<&str>,
        config: &Config,
        afar: bool,
    ) -> Result<Option<shard_protocol::sandbox::SandboxRequest>, AgentError> {
        let parent = request
            .identity
            .parent_agent_id
            .as_ref()
            .and_then(|parent| self.manifest(parent))
            .and_then(|parent| parent.sandbox);
        let asked = crate::sandbox::policy::narrowest(parent, request.sandbox);
        let sandbox = &self.context.sandbox;
        let runtime = runtime.unwrap_or(shard_platform::runtimes::BUILTIN);
        let applied =
            crate::sandbox::policy::for_agent(config, runtime, asked, sandbox.user_home.as_deref())
                .map_err(AgentError::SandboxWider)?;
        if !applied.contained() && afar {
            return Err(AgentError::UnsandboxedFromAfar);
        }
        if applied.contained() {
            sandbox
                .program()
                .map_err(|unavailable| AgentError::SandboxUnavailable(unavailable.0))?;
        }
        Ok(asked)
    }

    /// The managed-child fields of `agent.create`, checked: the depth and
    /// launch policy a child gets from its parent (never wider), a known
    /// tool allowlist, a bounded brief and alias pool.
    fn managed_fields(&self, request: &AgentCreate) -> Result<Managed, AgentError> {
        crate::agents::runtime::stdio::check_launch(request)?;
        if let Some(names) = &request.names {
            if names.len() > MAX_NAMES {
                return Err(AgentError::TooManyAliases { max: MAX_NAMES });
            }
            let problem = names.iter().find_map(|name| Some((name, alias_problem(name)?)));
            if let Some((alias, why)) = problem {
                return Err(AgentError::BadAlias { alias: alias.clone(), why });
            }
        }
        let asked = request.launch_policy;
        let Some(parent_id) = &request.identity.parent_agent_id else {
            return Ok(Managed {
                depth: 0,
                launch_policy: asked,
                tools: request.tools.clone(),
                mode: request.mode.clone(),
            });
        };
        let Some(parent) = self.manifest(parent_id) else {
            return Err(AgentError::NoAgent(parent_id.clone()));
        };
        parent.here()?;
        let inherited = parent.policy();
        if !parent.may_delegate() {
            return Err(AgentError::TooDeep {
                parent: parent_id.clone(),
                depth: parent.depth,
                max_depth: inherited.max_depth,
            });
        }
        let launch_policy = LaunchPolicy {
            max_tasks: asked
                .map_or(inherited.max_tasks, |asked| asked.max_tasks.min(inherited.max_tasks)),
            max_depth: asked
                .map_or(inherited.max_depth, |asked| asked.max_depth.min(inherited.max_depth)),
        };
        let tools = match (&request.tools, &parent.tools) {
            (asked, None) => asked.clone(),
            (None, Some(allowed)) => Some(allowed.clone()),
            (Some(asked), Some(allowed)) => {
                if let Some(extra) = asked.iter().find(|tool| !allowed.contains(tool)) {
                    return Err(AgentError::ToolBeyondParent {
                        parent: parent_id.clone(),
                        tool: extra.clone(),
                    });
                }
                Some(asked.clone())
            }
        };
        let mode = self.child_mode(&parent, request.mode.clone())?;
        Ok(Managed { depth: parent.depth + 1, launch_policy: Some(launch_policy), tools, mode })
    }

    /// `parent`'s mode as it is now (a person may have switched it since it
    /// was made).
    fn current_mode(&self, parent: &Manifest) -> Option<String> {
        self.info(&parent.agent_id).and_then(|info| info.mode).or(parent.mode.clone())
    }

    /// A child's mode: the one asked, else its parent's current one, and
    /// never one that may change files under a parent that may not.
    pub fn child_mode(
        &self,
        parent: &Manifest,
        asked: Option<String>,
    ) -> Result<Option<String>, AgentError> {
        let parent_mode = self.current_mode(parent);
        let Some(asked) = asked else { return Ok(parent_mode) };
        if !shard_platform::modes::is_known(&asked) {
            return Err(AgentError::UnknownMode(asked));
        }
        let parent_mutates =
            parent_mode.as_deref().is_none_or(shard_platform::modes::allows_mutation);
        if shard_platform::modes::allows_mutation(&asked) && !parent_mutates {
            return Err(AgentError::ModeBeyondParent {
                asked,
                parent_mode: parent_mode.unwrap_or_default(),
            });
        }
        Ok(Some(asked))
    }

    /// Whether `child` may still work for `parent` (a relaunch, a steer):
    /// its tools within its parent's, and its mode no wider than the
    /// parent's current one.
    pub fn within_parent(&self, parent: &str, child: &str) -> Result<(), AgentError> {
        let (Some(parent), Some(manifest)) = (self.manifest(parent), self.manifest(child)) else {
            return Err(AgentError::NoAgent(child.to_owned()));
        };
        if let Some(allowed) = &parent.tools {
            let extra = match &manifest.tools {
                None => Some("every tool".to_owned()),
                Some(tools) => tools.iter().find(|tool| !allowed.contains(tool)).cloned(),
            };
            if let Some(extra) = extra {
                return Err(AgentError::ChildHasMore {
                    child: child.to_owned(),
                    extra,
                    parent: parent.agent_id.clone(),
                });
            }
        }
        let parent_mode = self.current_mode(&parent);
        let child_mode = self.current_mode(&manifest);
        let parent_mutates =
            parent_mode.as_deref().is_none_or(shard_platform::modes::allows_mutation);
        let child_mutates =
            child_mode.as_deref().is_none_or(shard_platform::modes::allows_mutation);
        if child_mutates && !parent_mutates {
            return Err(AgentError::ChildModeWider {
                child: child.to_owned(),
                child_mode: child_mode.unwrap_or_else(|| shard_platform::modes::BUILD.to_owned()),
                parent_mode: parent_mode.unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// A legacy session may be adopted once, if it exists and reads cleanly.
    fn adoptable(&self, session_id: &str) -> Result<String, AgentError> {
        let home = &self.context.home;
        session_view::check(home, session_id)
            .map_err(|error| AgentError::session(session_id, error))?;
        let adopted =
            Manifest::load_all(home).iter().any(|manifest| manifest.session_id == session_id);
        if adopted {
            return Err(AgentError::SessionAdopted(session_id.to_owned()));
        }
        Ok(session_id.to_owned())
    }

    /// `session.activate`: switches an agent to another session of its
    /// lineage (its first session or a fork made from it) that no other
    /// agent runs. The session is read off the runtime's threads; only the
    /// check that no agent holds it and the switch itself are under the
    /// creation lock, so an adoption cannot take the same session at the
    /// same time and a slow disk holds up no creation.
    pub async fn activate(
        &self,
        request: SessionActivate,
    ) -> Result<SessionActivateResult, AgentError> {
        let SessionActivate { agent_id, session_id } = request;
        let Some(manifest) = self.manifest(&agent_id) else {
            return Err(AgentError::NoAgent(agent_id));
        };
        let current = manifest.session_id;
        if current == session_id {
            return Ok(SessionActivateResult {
                agent_id,
                previous_session_id: session_id.clone(),
                session_id,
            });
        }
        let home = self.context.home.clone();
        let (target, from) = (session_id.clone(), current.clone());
        let checked = tokio::task::spawn_blocking(move || {
            session_view::check(&home, &target).map_err(|error| (target.clone(), error))?;
            session_view::same_lineage(&home, &from, &target).map_err(|error| (from, error))
        })
        .await
        .map_err(|_| AgentError::SessionCheckStopped)?;
        let same_lineage = checked.map_err(|(which, error)| AgentError::session(&which, error))?;
        if !same_lineage {
            return Err(AgentError::NotInLineage { session_id, agent_id });
        }
        let _one_at_a_time = self.creating.lock().await;
        let holder = self
            .manifests()
            .values()
            .find(|other| other.session_id == session_id)
            .map(|other| other.agent_id.clone());
        if let Some(holder) = holder {
            return Err(AgentError::SessionHeld { session_id, holder });
        }
        // The host answers at once (it writes the manifest and no more); a
        // host with a full queue is busy, and says so rather than waits.
        let (reply, answer) = oneshot::channel();
        let command = HostCommand::Activate { session_id: session_id.clone(), reply };
        self.send(&agent_id, command).map_err(|refused| match refused {
            Refused::NotFound => AgentError::NoAgent(agent_id.clone()),
            _ => AgentError::SwitchBusy,
        })?;
        let previous = answer.await.map_err(|_| AgentError::HostGone)??;
        if let Some(manifest) = self.manifests().get_mut(&agent_id) {
            manifest.session_id.clone_from(&session_id);
        }
        Ok(SessionActivateResult { agent_id, session_id, previous_session_id: previous })
    }

    /// `sandbox.revoke`: takes back a host a person allowed always for an
    /// agent; its host tells every client (`agent_sandbox`).
    pub async fn revoke_host(
        &self,
        request: shard_protocol::sandbox::SandboxRevoke,
    ) -> Result<shard_protocol::sandbox::AgentSandbox, AgentError> {
        let shard_protocol::sandbox::SandboxRevoke { agent_id, host } = request;
        // A node's agent's grants are the node's.
        if self.remote(&agent_id).is_some() {
            let revoke = |remote| {
                let host = host.clone();
                ClientMessage::SandboxRevoke(shard_protocol::sandbox::SandboxRevoke {
                    agent_id: remote,
                    host,
                })
            };
            let data = self.on_node(&agent_id, revoke).await?;
            let mut revoked: shard_protocol::sandbox::AgentSandbox =
                serde_json::from_value(data.unwrap_or_default())
                    .map_err(|error| AgentError::NodeUnreadable(error.to_string()))?;
            revoked.agent_id = agent_id;
            revoked.sandbox = super::nodes::link::bounded_sandbox(revoked.sandbox);
            return Ok(revoked);
        }
        let Some(parsed) = shard_platform::sandbox::HostPort::parse(&host) else {
            return Err(AgentError::NotGranted(host));
        };
        let (reply, answer) = oneshot::channel();
        let command = HostCommand::RevokeHost { host: parsed, reply };
        self.send(&agent_id, command).map_err(|refused| match refused {
            Refused::NotFound => AgentError::NoAgent(agent_id.clone()),
            _ => AgentError::SwitchBusy,
        })?;
        let sandbox = answer.await.map_err(|_| AgentError::HostGone)??;
        Ok(shard_protocol::sandbox::AgentSandbox { agent_id, sandbox })
    }

    /// `runtime.list`: the built-in agent, then every configured runtime.
    /// The runtimes config.toml names after the built-in one, and the
    /// built-in agent's default model.
    pub fn runtimes(&self) -> Result<(Vec<RuntimeInfo>, String), AgentError> {
        let config = Config::load(&self.context.home).map_err(AgentError::Config)?;
        let builtin = shard_platform::runtimes::BUILTIN;
        let mut runtimes =
            vec![RuntimeInfo { id: builtin.to_owned(), protocol: builtin.to_owned() }];
        runtimes.extend(config.runtimes.iter().map(|runtime| RuntimeInfo {
            id: runtime.id.clone(),
            protocol: runtime.protocol.as_str().to_owned(),
        }));
        Ok((runtimes, config.default_model))
    }

    /// Stops every process as `mode` says, and waits until each has
    /// exited. Dormant agents have none; one woken from now on starts none.
    /// Called again with a stronger mode, it escalates.
    pub async fn shutdown(&self, mode: ShutdownMode) {
        let mut waits = Vec::new();
        for agent_id in self.hosts.shutting_down(mode) {
            let (reply, done) = oneshot::channel();
            let command = HostCommand::Shutdown { mode, reply };
            if self.send_waiting(&agent_id, command).await.is_ok() {
                waits.push(done);
            }
        }
        for done in waits {
            let _ = done.await;
        }
    }
}

/// What a creation's parent decides about it.
struct Managed {
    depth: u32,
    launch_policy: Option<LaunchPolicy>,
    /// The tool allowlist: a child's is within its parent's.
    tools: Option<Vec<String>>,
    mode: Option<String>,
}

/// The most aliases an agent's pool may hold.
const MAX_NAMES: usize = 256;

/// Lists the nodes' agents as their links tell of them, until the links
/// stop.
pub async fn follow_nodes(
    registry: Arc<Registry>,
    mut news: tokio::sync::mpsc::Receiver<super::nodes::News>,
) {
    while let Some(news) = news.recv().await {
        match news {
            super::nodes::News::Listed { node, agents } => registry.adopt(&node, agents).await,
            super::nodes::News::Spawned { node, info } => registry.adopt(&node, vec![*info]).await,
            super::nodes::News::Status { node, changed } => {
                let agent_id = shard_platform::nodes::qualified(&node, &changed.agent_id);
                let said = HostCommand::NodeSaid {
                    status: changed.status,
                    runtime_state: changed.runtime_state,
                };
                // One the hub does not list (another node's, or gone) is let be.
                let _ = registry.send(&agent_id, said);
            }
            super::nodes::News::Sandbox { node, told } => {
                let agent_id = shard_platform::nodes::qualified(&node, &told.agent_id);
                let sandbox = super::nodes::link::bounded_sandbox(told.sandbox);
                let _ = registry.send(&agent_id, HostCommand::NodeSandbox(sandbox));
            }
            super::nodes::News::Asked { node, agent_id } => {
                let agent_id = shard_platform::nodes::qualified(&node, &agent_id);
                let (reply, _started) = oneshot::channel();
                // One the hub does not list (another node's, or gone) is let be.
                let _ = registry.send(&agent_id, HostCommand::Start { reply });
            }
            super::nodes::News::Workspace { node, told } => {
                if let Some(line) = super::nodes::workspaces::told(&node, *told) {
                    registry.context.broadcast.broadcast(&super::Wire::from(line));
                }
            }
        }
    }
}

/// A node's refusal of a command the hub sent it for a client: its code,
/// its message after the node's id, and its data with every agent and
/// workspace id made the hub's (none, if an id there is not plain).
pub fn refused_by(node: &str, error: shard_protocol::WireError) -> AgentError {
    let qualified = |mut data| super::nodes::workspaces::qualify(&mut data, node).map(|()| data);
    let data = error.data.and_then(|data| qualified(data).ok()).map(Box::new);
    AgentError::Node { node: node.to_owned(), code: error.code, message: error.message, data }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use shard_protocol::WireError;

    use super::*;

    #[test]
    fn a_nodes_refusal_keeps_its_data_in_the_hubs_ids() {
        let held =
            WireError::new(ErrorCode::Conflict, "held").with_data(json!({"agent_id": "a-1"}));
        let wire = WireError::from(refused_by("box", held));
        assert_eq!(wire.code, ErrorCode::Conflict);
        assert_eq!(wire.message, "node `box`: held");
        assert_eq!(wire.data, Some(json!({"agent_id": "a-1@box"})));
        let chained =
            WireError::new(ErrorCode::Conflict, "x").with_data(json!({"agent_id": "a@b"}));
        assert_eq!(WireError::from(refused_by("box", chained)).data, None);
    }
}
