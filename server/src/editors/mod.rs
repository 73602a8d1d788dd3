//! `shard acp`: Shard as an ACP agent (protocol version 1) on stdin and
//! stdout, for any ACP client (an editor, a terminal client) to start as its
//! agent command (docs/EDITORS.md). It is a client of the running daemon:
//! each ACP session is one of the daemon's agents, so a session started in
//! the editor shows in every tab and phone, one started in a browser can be
//! loaded in the editor, and a question can be answered anywhere.
//!
//! The ACP side is the `agent-client-protocol` SDK's agent; the daemon side
//! is the unix socket ([`daemon`]). Requests are handled off the SDK's
//! dispatch loop (each spawned), and everything the editor is told of an
//! agent goes through one ordered task ([`pump`]), made with the pure
//! translations of [`translate`].

pub mod daemon;
mod options;
pub mod pump;
pub mod stdio;
pub mod translate;

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AgentResponse, ClientNotification, ClientRequest, ContentBlock,
    Implementation, InitializeResponse, ListSessionsResponse, LoadSessionResponse,
    NewSessionResponse, ResumeSessionResponse, SessionCapabilities, SessionInfo,
    SessionListCapabilities, SessionMode, SessionModeState, SessionResumeCapabilities,
    SetSessionConfigOptionResponse, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use anyhow::Context;
use serde::Deserialize;
use shard_protocol::ClientMessage;
use shard_protocol::WireError;
use shard_protocol::agent::{AgentCommands, Empty};
use shard_protocol::agent::{Prompt, SetMode, StreamingBehavior};
use shard_protocol::orchestrator::{AgentAttach, AgentCreate};
use shard_protocol::types::AgentInfo;
use tokio::sync::{mpsc, oneshot};

use self::daemon::Daemon;
use self::pump::Input;

/// What the pump is handed at most, in events and the handlers' word.
const PUMP: usize = daemon::EVENTS;

#[derive(Debug, Clone, clap::Args)]
pub struct AcpArgs {
    /// The daemon's home (default: $SHARD_HOME, else ~/.shard).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The runtime new sessions run: `shard` (Shard's own agent, the
    /// default) or a configured runtime's id.
    #[arg(long, value_name = "ID")]
    pub runtime: Option<String>,
}

struct Shared {
    home: PathBuf,
    /// The daemon's connection; another is made when it has ended (the
    /// daemon restarted), at the next request that needs it.
    daemon: tokio::sync::Mutex<Arc<Daemon>>,
    pump: mpsc::Sender<Input>,
    runtime: Option<String>,
}

impl Shared {
    async fn daemon(&self) -> Result<Arc<Daemon>, agent_client_protocol::Error> {
        let mut current = self.daemon.lock().await;
        if current.closed() {
            let generation = current.generation + 1;
            *current = daemon::connect(&self.home, generation, self.pump.clone(), Input::read)
                .await
                .map_err(|error| {
                    agent_client_protocol::Error::internal_error().data(error.to_string())
                })?;
        }
        Ok(current.clone())
    }

    async fn call(
        &self,
        agent: Option<&str>,
        message: ClientMessage,
    ) -> Result<Option<serde_json::Value>, agent_client_protocol::Error> {
        self.daemon().await?.call(agent, message).await.map_err(refused)
    }
}

/// Serves ACP on stdin/stdout until the editor closes it.
pub async fn run(args: AcpArgs) -> anyhow::Result<()> {
    let home = match args.home {
        Some(home) => home,
        None => shard_platform::config::shard_home()?,
    };
    let (pump, inputs) = mpsc::channel(PUMP);
    let daemon = daemon::connect(&home, 1, pump.clone(), Input::read).await?;
    let shared = Arc::new(Shared {
        home,
        daemon: tokio::sync::Mutex::new(daemon),
        pump,
        runtime: args.runtime,
    });
    let (to_editor, from_editor) = stdio::pipes();
    let on_request = shared.clone();
    let on_notification = shared;
    Agent
        .v1()
        .name("shard")
        .on_receive_request(
            async move |request: ClientRequest,
                        responder: Responder<serde_json::Value>,
                        editor: ConnectionTo<Client>| {
                let shared = on_request.clone();
                editor.spawn(async move {
                    handle(&shared, request, responder).await;
                    Ok(())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: ClientNotification, editor: ConnectionTo<Client>| {
                let ClientNotification::CancelNotification(cancel) = notification else {
                    return Ok(());
                };
                let shared = on_notification.clone();
                editor.spawn(async move {
                    cancel_turn(&shared, cancel.session_id.to_string()).await;
                    Ok(())
                })
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(
            Lines::new(to_editor, from_editor),
            async move |editor: ConnectionTo<Client>| {
                // The editor closing its end ends `shard acp`; the agents go on
                // in the daemon, for every tab and the next editor.
                let closing = editor.clone();
                tokio::select! {
                    told = pump::run(inputs, editor) => told,
                    () = closing.incoming_closed() => Ok(()),
                }
            },
        )
        .await
        .map_err(|error| anyhow::anyhow!("ACP: {error}"))
        .context("the editor's connection ended")
}

fn refused(error: WireError) -> agent_client_protocol::Error {
    let error_code = error.code.as_str().to_owned();
    agent_client_protocol::Error::internal_error()
        .data(serde_json::json!({"code": error_code, "message": translate::safe(&error.message)}))
}

fn invalid(why: &str) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(why.to_owned())
}

async fn handle(shared: &Shared, request: ClientRequest, responder: Responder<serde_json::Value>) {
    let loaded = match &request {
        ClientRequest::LoadSessionRequest(load) => Some(load.session_id.to_string()),
        ClientRequest::ResumeSessionRequest(resume) => Some(resume.session_id.to_string()),
        _ => None,
    };
    let answered = match request {
        ClientRequest::InitializeRequest(_) => {
            let capabilities = AgentCapabilities::new().load_session(true).session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new()),
            );
            Ok(AgentResponse::InitializeResponse(
                InitializeResponse::new(ProtocolVersion::V1)
                    .agent_capabilities(capabilities)
                    .agent_info(Implementation::new("shard", env!("CARGO_PKG_VERSION"))),
            ))
        }
        ClientRequest::NewSessionRequest(new) => {
            new_session(shared, new.cwd).await.map(AgentResponse::NewSessionResponse)
        }
        ClientRequest::LoadSessionRequest(load) => {
            load_session(shared, load.session_id.to_string())
                .await
                .map(AgentResponse::LoadSessionResponse)
        }
        ClientRequest::ResumeSessionRequest(resume) => {
            resume_session(shared, resume.session_id.to_string())
                .await
                .map(AgentResponse::ResumeSessionResponse)
        }
        ClientRequest::ListSessionsRequest(list) => {
            list_sessions(shared, list.cwd).await.map(|sessions| {
                AgentResponse::ListSessionsResponse(ListSessionsResponse::new(sessions))
            })
        }
        ClientRequest::SetSessionModeRequest(set) => {
            let command = ClientMessage::SetMode(SetMode { mode: set.mode_id.to_string() });
            shared
                .call(Some(&set.session_id.to_string()), command)
                .await
                .map(|_| AgentResponse::SetSessionModeResponse(SetSessionModeResponse::new()))
        }
        ClientRequest::SetSessionConfigOptionRequest(set) => {
            let agent_id = set.session_id.to_string();
            let id = set.config_id.to_string();
            match serde_json::to_value(&set.value).ok().and_then(|value| match value {
                serde_json::Value::String(value) => Some(value),
                value => value["value"].as_str().map(str::to_owned),
            }) {
                None => Err(invalid("every option here is a choice: send its value id")),
                Some(value) => match options::set(shared, &agent_id, &id, &value).await {
                    Ok(()) => Ok(AgentResponse::SetSessionConfigOptionResponse(
                        SetSessionConfigOptionResponse::new(options::of(shared, &agent_id).await),
                    )),
                    Err(error) => Err(error),
                },
            }
        }
        ClientRequest::PromptRequest(prompt) => {
            // Answered by the pump when the prompt's turn ends.
            return prompt_turn(shared, prompt.session_id.to_string(), &prompt.prompt, responder)
                .await;
        }
        _ => Err(agent_client_protocol::Error::method_not_found()),
    };
    // Once the editor knows the session: the commands its agent offers.
    let opened = match &answered {
        Ok(AgentResponse::NewSessionResponse(new)) => Some(new.session_id.to_string()),
        Ok(AgentResponse::LoadSessionResponse(_) | AgentResponse::ResumeSessionResponse(_)) => {
            loaded.clone()
        }
        _ => None,
    };
    let _ = match answered.and_then(|response| {
        serde_json::to_value(response).map_err(agent_client_protocol::Error::into_internal_error)
    }) {
        Ok(response) => responder.respond(response),
        Err(error) => responder.respond_with_error(error),
    };
    if let Some(agent_id) = opened {
        tell_commands(shared, agent_id).await;
    }
}

/// The session's options, for the pump to keep current as the agent's
/// mode and model change (from anywhere).
/// Told before the editor is answered, so that the first model call's
/// usage is told with its window.
async fn tell_options(
    shared: &Shared,
    agent_id: &str,
    options: Vec<agent_client_protocol::v1::schema::SessionConfigOption>,
) {
    let usage = options::usage(shared, agent_id).await;
    let agent_id = agent_id.to_owned();
    let _ = shared.pump.send(Input::Options { agent_id, options, usage }).await;
}

async fn tell_commands(shared: &Shared, agent_id: String) {
    let Ok(Some(data)) = shared.call(Some(&agent_id), ClientMessage::ListCommands(Empty {})).await
    else {
        return;
    };
    if let Ok(commands) = serde_json::from_value::<AgentCommands>(data)
        && !commands.commands.is_empty()
    {
        let _ = shared.pump.send(Input::Commands { agent_id, commands }).await;
    }
}

/// The agent's modes, as the editor offers them.
async fn modes(shared: &Shared, agent_id: &str) -> Option<SessionModeState> {
    #[derive(Deserialize)]
    struct Catalog {
        modes: Vec<Described>,
        active: String,
    }
    #[derive(Deserialize)]
    struct Described {
        name: String,
        #[serde(default)]
        description: Option<String>,
    }
    let data = shared.call(Some(agent_id), ClientMessage::ListModes(Empty {})).await.ok()??;
    let catalog: Catalog = serde_json::from_value(data).ok()?;
    let available = catalog
        .modes
        .into_iter()
        .map(|mode| {
            SessionMode::new(mode.name.clone(), translate::safe(&mode.name))
                .description(mode.description.as_deref().map(translate::safe))
        })
        .collect();
    Some(SessionModeState::new(catalog.active, available))
}

/// Attaches the connection to `agent_id` as an interactive client, the
/// pump told first so that nothing the agent says after is missed.
async fn attach(
    shared: &Shared,
    agent_id: &str,
    replayed: Option<oneshot::Sender<()>>,
) -> Result<(), agent_client_protocol::Error> {
    let daemon = shared.daemon().await?;
    let open = Input::Open { agent_id: agent_id.to_owned(), daemon: daemon.clone(), replayed };
    shared.pump.send(open).await.map_err(|_| invalid("shutting down"))?;
    // The agents already spawned under it, before it is attached: their
    // questions come once it is (one spawned from now on is told).
    let descendants = options::descendants(shared, agent_id).await;
    let family = Input::Family { agent_id: agent_id.to_owned(), descendants };
    shared.pump.send(family).await.map_err(|_| invalid("shutting down"))?;
    let attach = AgentAttach { agent_id: agent_id.to_owned(), role: None, after_seq: None };
    daemon.call(None, ClientMessage::AgentAttach(attach)).await.map_err(refused)?;
    Ok(())
}

async fn new_session(
    shared: &Shared,
    cwd: PathBuf,
) -> Result<NewSessionResponse, agent_client_protocol::Error> {
    let cwd = cwd.to_str().ok_or_else(|| invalid("`cwd` is not UTF-8"))?.to_owned();
    let create = AgentCreate { cwd, runtime: shared.runtime.clone(), ..AgentCreate::default() };
    let data = shared.call(None, ClientMessage::AgentCreate(create)).await?.unwrap_or_default();
    let agent_id = data["agent_id"].as_str().ok_or_else(|| invalid("no agent_id"))?.to_owned();
    attach(shared, &agent_id, None).await?;
    let modes = modes(shared, &agent_id).await;
    let options = options::of(shared, &agent_id).await;
    tell_options(shared, &agent_id, options.clone()).await;
    Ok(NewSessionResponse::new(agent_id).modes(modes).config_options(options))
}

async fn load_session(
    shared: &Shared,
    agent_id: String,
) -> Result<LoadSessionResponse, agent_client_protocol::Error> {
    let (replayed, told) = oneshot::channel();
    attach(shared, &agent_id, Some(replayed)).await?;
    // The history is told before the answer, as ACP asks.
    told.await.map_err(|_| invalid("the daemon's connection closed"))?;
    let modes = modes(shared, &agent_id).await;
    let options = options::of(shared, &agent_id).await;
    tell_options(shared, &agent_id, options.clone()).await;
    Ok(LoadSessionResponse::new().modes(modes).config_options(options))
}

/// `session/resume`: the session followed again without its history (the
/// editor has it); the questions still open are asked.
async fn resume_session(
    shared: &Shared,
    agent_id: String,
) -> Result<ResumeSessionResponse, agent_client_protocol::Error> {
    attach(shared, &agent_id, None).await?;
    let (modes, options) = tokio::join!(modes(shared, &agent_id), options::of(shared, &agent_id));
    tell_options(shared, &agent_id, options.clone()).await;
    Ok(ResumeSessionResponse::new().modes(modes).config_options(options))
}

async fn list_sessions(
    shared: &Shared,
    cwd: Option<PathBuf>,
) -> Result<Vec<SessionInfo>, agent_client_protocol::Error> {
    #[derive(Deserialize)]
    struct Listed {
        agents: Vec<AgentInfo>,
    }
    let data = shared.call(None, ClientMessage::AgentList(Empty {})).await?.unwrap_or_default();
    let listed: Listed = serde_json::from_value(data).map_err(|_| invalid("an unreadable list"))?;
    let mut agents = listed.agents;
    agents.sort_by_key(|agent| std::cmp::Reverse(agent.created_at));
    Ok(agents
        .into_iter()
        .filter(|agent| cwd.as_ref().is_none_or(|cwd| cwd.as_os_str() == agent.cwd.as_str()))
        .map(|agent| {
            let title = agent.identity.name.as_deref().map(translate::safe);
            SessionInfo::new(agent.agent_id, agent.cwd).title(title)
        })
        .collect())
}

async fn prompt_turn(
    shared: &Shared,
    agent_id: String,
    blocks: &[ContentBlock],
    responder: Responder<serde_json::Value>,
) {
    let text: Vec<String> = blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            ContentBlock::ResourceLink(link) => Some(link.uri.clone()),
            _ => None,
        })
        .collect();
    let text = text.join("\n");
    if text.trim().is_empty() {
        let _ = responder.respond_with_error(invalid("the prompt holds no text"));
        return;
    }
    let waiting = Input::Prompt { agent_id: agent_id.clone(), text: text.clone(), responder };
    if shared.pump.send(waiting).await.is_err() {
        return;
    }
    // A follow-up: while the agent is on a turn (one a tab started), it
    // waits for that turn's end; an idle agent starts at once.
    let prompt = Prompt {
        message: text,
        images: None,
        streaming_behavior: Some(StreamingBehavior::FollowUp),
        pinned: None,
    };
    if let Err(error) = shared.call(Some(&agent_id), ClientMessage::Prompt(prompt)).await {
        let _ = shared.pump.send(Input::Refused { agent_id, error }).await;
    }
}

async fn cancel_turn(shared: &Shared, agent_id: String) {
    let _ = shared.pump.send(Input::Cancel { agent_id: agent_id.clone() }).await;
    if let Err(error) = shared.call(Some(&agent_id), ClientMessage::Abort(Empty {})).await {
        tracing::debug!(%error, "the daemon did not abort the turn");
    }
}
