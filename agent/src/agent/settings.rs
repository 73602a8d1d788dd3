//! The agent's settings: the mode, the model and its reasoning level, each
//! listed from its catalog and changed by a command that is recorded in
//! the session log and announced before it is answered (§9.2).

use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    Effective, ListModelsResult, ListModesResult, ListReasoningLevelsResult, ModeChanged,
    ModelChanged, ReasoningLevelChange, SetModeResult, SetModelResult,
};

use super::{Agent, Answer, Refusal, ok};
use crate::config::ModelConfig;
use crate::modes;
use crate::session_log::EntryBody;

impl Agent {
    pub(super) fn list_modes(&self) -> Answer {
        let active = self.shared.state().mode.clone();
        ok(ListModesResult { modes: modes::catalog(), active })
    }

    /// Shard's own agent offers no commands of its own (an ACP agent's
    /// slash commands are what `list_commands` is for).
    pub(super) fn list_commands(&self) -> Answer {
        ok(shard_protocol::agent::AgentCommands { commands: Vec::new() })
    }

    pub(super) fn list_models(&self) -> Answer {
        let (active, _) = self.shared.active_model();
        ok(ListModelsResult {
            models: self.shared.config.models.iter().map(ModelConfig::descriptor).collect(),
            active: active.descriptor(),
        })
    }

    pub(super) async fn set_mode(&self, mode: String) -> Answer {
        if !modes::is_known(&mode) {
            return Err(Refusal::UnknownMode(mode));
        }
        let previous = std::mem::replace(&mut self.shared.state().mode, mode.clone());
        if previous != mode {
            self.record(EntryBody::Settings {
                mode: Some(mode.clone()),
                model: None,
                reasoning_level: None,
            })
            .await?;
            // §9.2: the event goes out before the response.
            self.shared
                .emit(ServerMessage::ModeChanged(ModeChanged {
                    previous_mode: previous.clone(),
                    mode: mode.clone(),
                }))
                .await;
        }
        ok(SetModeResult { previous_mode: previous, mode })
    }

    pub(super) async fn set_model(&self, id: String) -> Answer {
        let Some(next) = self.shared.model_config(&id).cloned() else {
            return Err(Refusal::UnknownModel(id));
        };
        let (previous, _) = self.shared.active_model();
        if previous.id != next.id {
            {
                let mut state = self.shared.state();
                state.model = next.id.clone();
                state.reasoning_level = next.default_level();
            }
            self.record(EntryBody::Settings {
                mode: None,
                model: Some(next.id.clone()),
                reasoning_level: next.default_level(),
            })
            .await?;
            self.shared
                .emit(ServerMessage::ModelChanged(ModelChanged {
                    previous: previous.descriptor(),
                    active: next.descriptor(),
                    effective: Effective::NextProviderCall,
                    capabilities: Some(self.shared.capabilities()),
                }))
                .await;
        }
        ok(SetModelResult {
            previous: previous.descriptor(),
            active: next.descriptor(),
            effective: Effective::NextProviderCall,
        })
    }

    pub(super) fn list_reasoning_levels(&self) -> Answer {
        let (model, level) = self.shared.active_model();
        if model.reasoning_levels.is_empty() {
            return Err(Refusal::NoReasoningLevels { model: model.id });
        }
        ok(ListReasoningLevelsResult {
            model: model.descriptor(),
            levels: model.levels(),
            active: level.or_else(|| model.default_level()).unwrap_or_default(),
            effective: Effective::NextProviderCall,
        })
    }

    pub(super) async fn set_reasoning_level(&self, model_id: String, effort: String) -> Answer {
        let (model, current) = self.shared.active_model();
        if model.id != model_id {
            return Err(Refusal::NotActiveModel { active: model.id, asked: model_id });
        }
        if model.level(&effort).is_none() {
            return Err(Refusal::UnknownLevel { model: model.id, level: effort });
        }
        let previous = current.or_else(|| model.default_level()).unwrap_or_default();
        let change = ReasoningLevelChange {
            model: model.descriptor(),
            previous: previous.clone(),
            active: effort.clone(),
            effective: Effective::NextProviderCall,
        };
        if previous != effort {
            self.shared.state().reasoning_level = Some(effort.clone());
            self.record(EntryBody::Settings {
                mode: None,
                model: None,
                reasoning_level: Some(effort),
            })
            .await?;
            self.shared.emit(ServerMessage::ReasoningLevelChanged(change.clone())).await;
        }
        ok(change)
    }
}
