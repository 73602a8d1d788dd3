//! What the runtime of the agent on screen advertises (`sync.capabilities`)
//! and the catalogs its pickers are built from (`list_modes`,
//! `list_models`, `list_reasoning_levels`), with the choices in force:
//! they follow `mode_changed`, `model_changed` and
//! `reasoning_level_changed` from other tabs too. An agent that offers
//! commands of its own (`list_commands`, `commands_changed`) has them
//! suggested as the user types `/`.

use leptos::prelude::*;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    AgentCommand, AgentCommands, ListModelsResult, ListModesResult, ListReasoningLevelsResult,
};
use shard_protocol::message::Response;
use shard_protocol::types::{ModeDescriptor, ModelDescriptor, ReasoningLevel};

use crate::link::Request;

/// Which catalogs to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    pub modes: bool,
    pub models: bool,
    pub levels: bool,
    pub commands: bool,
}

#[derive(Clone, Copy)]
pub struct Catalogs {
    pub capabilities: RwSignal<Vec<String>>,
    pub mode: RwSignal<String>,
    pub modes: RwSignal<Vec<ModeDescriptor>>,
    pub models: RwSignal<Vec<ModelDescriptor>>,
    pub model: RwSignal<Option<ModelDescriptor>>,
    pub levels: RwSignal<Vec<ReasoningLevel>>,
    pub level: RwSignal<Option<String>>,
    pub commands: RwSignal<Vec<AgentCommand>>,
}

impl Catalogs {
    pub fn new() -> Self {
        Self {
            capabilities: RwSignal::new(Vec::new()),
            mode: RwSignal::new(String::new()),
            modes: RwSignal::new(Vec::new()),
            models: RwSignal::new(Vec::new()),
            model: RwSignal::new(None),
            levels: RwSignal::new(Vec::new()),
            level: RwSignal::new(None),
            commands: RwSignal::new(Vec::new()),
        }
    }

    /// Whether the runtime advertises `capability` (tracked).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.with(|capabilities| capabilities.iter().any(|known| known == capability))
    }

    /// Another agent is on screen: its runtime has said nothing yet.
    pub fn clear(&self) {
        self.capabilities.set(Vec::new());
        self.modes.set(Vec::new());
        self.models.set(Vec::new());
        self.levels.set(Vec::new());
        self.commands.set(Vec::new());
    }

    /// A `sync`'s mode and capabilities; controls exist only for what the
    /// runtime advertises (§7, §9.1), so those are the catalogs to ask for.
    pub fn synced(&self, mode: String, capabilities: Vec<String>) -> Wanted {
        self.mode.set(mode);
        let has = |name: &str| capabilities.iter().any(|known| known == name);
        let wanted = Wanted {
            modes: has("mode-catalog"),
            models: has("model-catalog"),
            levels: has("reasoning-catalog"),
            commands: has("command-catalog"),
        };
        self.capabilities.set(capabilities);
        wanted
    }

    /// A change another tab (or the agent) made. A model change may bring
    /// other capabilities: then the levels are asked for again (`Some`,
    /// with whether the new model has any).
    pub fn changed(&self, message: ServerMessage) -> Option<Wanted> {
        match message {
            ServerMessage::ModeChanged(changed) => self.mode.set(changed.mode),
            ServerMessage::ModelChanged(changed) => {
                self.model.set(Some(changed.active));
                let capabilities = changed.capabilities?;
                let levels = capabilities.iter().any(|known| known == "reasoning-catalog");
                self.capabilities.set(capabilities);
                return Some(Wanted { modes: false, models: false, levels, commands: false });
            }
            ServerMessage::ReasoningLevelChanged(changed) => self.level.set(Some(changed.active)),
            ServerMessage::CommandsChanged(changed) => self.commands.set(changed.commands),
            _ => {}
        }
        None
    }

    /// The answer to a catalog query of the runtime generation `current`.
    pub fn answered(&self, request: Request, response: Response, current: Option<u64>) {
        match request {
            // A superseded runtime's catalog is no longer the agent's.
            Request::Modes { epoch }
            | Request::Models { epoch }
            | Request::Levels { epoch }
            | Request::Commands { epoch }
                if epoch != current => {}
            Request::Modes { .. } => {
                if let Ok(ListModesResult { modes, active }) = response.data() {
                    self.modes.set(modes);
                    self.mode.set(active);
                }
            }
            Request::Models { .. } => {
                if let Ok(ListModelsResult { models, active }) = response.data() {
                    self.models.set(models);
                    self.model.set(Some(active));
                }
            }
            Request::Levels { .. } => match response.data::<ListReasoningLevelsResult>() {
                Ok(result) => {
                    self.levels.set(result.levels);
                    self.level.set(Some(result.active));
                }
                Err(_) => self.levels.set(Vec::new()),
            },
            Request::Commands { .. } => {
                let commands = response.data::<AgentCommands>().map(|listed| listed.commands);
                self.commands.set(commands.unwrap_or_default());
            }
            _ => {}
        }
    }
}

impl Default for Catalogs {
    fn default() -> Self {
        Self::new()
    }
}
