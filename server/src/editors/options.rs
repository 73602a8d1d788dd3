//! A session's settings as ACP config options: its mode and its model
//! (categories `mode` and `model`), and the runtime it runs on (category
//! `_runtime`, Shard's own). The editor shows them as menus; a choice goes
//! to the daemon as `set_mode` or `set_model`. The runtime is the one the
//! session was made with (`shard acp --runtime`; an editor lists one agent
//! command per runtime): an agent keeps its runtime, so a choice of another
//! is refused with a reason.

use agent_client_protocol::v1::schema::{
    SessionConfigKind, SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};
use serde::Deserialize;
use shard_protocol::ClientMessage;
use shard_protocol::agent::{Empty, ListModelsResult, SetMode, SetModel};
use shard_protocol::types::AgentInfo;

use super::{Shared, invalid, translate};

pub(super) const MODE: &str = "mode";
pub(super) const MODEL: &str = "model";
pub(super) const RUNTIME: &str = "runtime";

/// The options as the agent has them now; each one the daemon cannot tell
/// (a runtime without a model catalog) is left out.
pub(super) async fn of(shared: &Shared, agent_id: &str) -> Vec<SessionConfigOption> {
    let (mode, model, runtime) =
        tokio::join!(mode(shared, agent_id), model(shared, agent_id), runtime(shared, agent_id));
    [mode, model, runtime].into_iter().flatten().collect()
}

/// Sets option `id` to `value` on the agent.
pub(super) async fn set(
    shared: &Shared,
    agent_id: &str,
    id: &str,
    value: &str,
) -> Result<(), agent_client_protocol::Error> {
    let command = match id {
        MODE => ClientMessage::SetMode(SetMode { mode: value.to_owned() }),
        MODEL => ClientMessage::SetModel(SetModel { model: value.to_owned() }),
        RUNTIME => {
            let now = info(shared, agent_id).await.and_then(|info| info.runtime);
            if now.as_deref() == Some(value) {
                return Ok(());
            }
            return Err(invalid(
                "an agent keeps the runtime it was made with: choose the runtime in a new \
                 session's options (or start `shard acp --runtime ID`)",
            ));
        }
        _ => return Err(invalid(&format!("no option `{}`", translate::safe(id)))),
    };
    shared.call(Some(agent_id), command).await.map(drop)
}

/// Option `id` now has `value` (a change the agent announced): whether it
/// was one of `options` and changed.
pub fn now(options: &mut [SessionConfigOption], id: &str, value: &str) -> bool {
    let option = options.iter_mut().find(|option| option.id.to_string() == id);
    match option.map(|option| &mut option.kind) {
        Some(SessionConfigKind::Select(select)) if select.current_value.to_string() != value => {
            select.current_value = value.to_owned().into();
            true
        }
        _ => false,
    }
}

fn choices(values: impl IntoIterator<Item = (String, String)>) -> Vec<SessionConfigSelectOption> {
    let choice = |(value, name): (String, String)| {
        SessionConfigSelectOption::new(value, translate::safe(&name))
    };
    values.into_iter().map(choice).collect()
}

async fn mode(shared: &Shared, agent_id: &str) -> Option<SessionConfigOption> {
    #[derive(Deserialize)]
    struct Catalog {
        modes: Vec<Named>,
        active: String,
    }
    #[derive(Deserialize)]
    struct Named {
        name: String,
    }
    let data = shared.call(Some(agent_id), ClientMessage::ListModes(Empty {})).await.ok()??;
    let catalog: Catalog = serde_json::from_value(data).ok()?;
    let names = catalog.modes.into_iter().map(|mode| (mode.name.clone(), mode.name));
    let option = SessionConfigOption::select(MODE, "Mode", catalog.active, choices(names));
    Some(option.category(SessionConfigOptionCategory::Mode))
}

async fn model(shared: &Shared, agent_id: &str) -> Option<SessionConfigOption> {
    let data = shared.call(Some(agent_id), ClientMessage::ListModels(Empty {})).await.ok()??;
    let catalog: ListModelsResult = serde_json::from_value(data).ok()?;
    let ids = catalog.models.into_iter().map(|model| (model.id.clone(), model.id));
    let option = SessionConfigOption::select(MODEL, "Model", catalog.active.id, choices(ids));
    Some(option.category(SessionConfigOptionCategory::Model))
}

async fn runtime(shared: &Shared, agent_id: &str) -> Option<SessionConfigOption> {
    #[derive(Deserialize)]
    struct Runtimes {
        runtimes: Vec<Runtime>,
    }
    #[derive(Deserialize)]
    struct Runtime {
        id: String,
    }
    let current = info(shared, agent_id).await?.runtime?;
    let data = shared.call(None, ClientMessage::RuntimeList(Default::default())).await.ok()??;
    let listed: Runtimes = serde_json::from_value(data).ok()?;
    let ids = listed.runtimes.into_iter().map(|runtime| (runtime.id.clone(), runtime.id));
    let option = SessionConfigOption::select(RUNTIME, "Runtime", current, choices(ids));
    Some(option.category(SessionConfigOptionCategory::Other("_runtime".to_owned())))
}

/// What the editor is told of a session's context and cost.
#[derive(Default)]
pub struct Usage {
    /// The model's context window, in tokens, when its catalog says.
    pub window: Option<u64>,
    /// Dollars spent so far, when priced.
    pub spent: Option<f64>,
}

/// The agent's model's context window and what it has cost so far.
pub(super) async fn usage(shared: &Shared, agent_id: &str) -> Usage {
    let models = async {
        let data =
            shared.call(Some(agent_id), ClientMessage::ListModels(Empty {})).await.ok()??;
        serde_json::from_value::<ListModelsResult>(data).ok()
    };
    let (models, info) = tokio::join!(models, info(shared, agent_id));
    Usage {
        window: models.and_then(|models| models.active.context_window),
        spent: info.and_then(|info| info.usage).and_then(|usage| usage.cost),
    }
}

/// The agents spawned under `agent_id`, at any depth.
pub(super) async fn descendants(shared: &Shared, agent_id: &str) -> Vec<String> {
    let Some(agents) = list(shared).await else { return Vec::new() };
    let mut found = vec![agent_id.to_owned()];
    let mut at = 0;
    while at < found.len() {
        let parent = found[at].clone();
        let children = agents.iter().filter(|agent| {
            agent.identity.parent_agent_id.as_deref() == Some(parent.as_str())
                && !found.contains(&agent.agent_id)
        });
        let children: Vec<String> = children.map(|agent| agent.agent_id.clone()).collect();
        found.extend(children);
        at += 1;
    }
    found.split_off(1)
}

async fn list(shared: &Shared) -> Option<Vec<AgentInfo>> {
    #[derive(Deserialize)]
    struct Listed {
        agents: Vec<AgentInfo>,
    }
    let data = shared.call(None, ClientMessage::AgentList(Empty {})).await.ok()??;
    serde_json::from_value::<Listed>(data).ok().map(|listed| listed.agents)
}

/// The agent as `agent.list` lists it.
async fn info(shared: &Shared, agent_id: &str) -> Option<AgentInfo> {
    list(shared).await?.into_iter().find(|agent| agent.agent_id == agent_id)
}
