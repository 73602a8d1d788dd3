//! Modes and models. An ACP agent offers its modes as the session's modes
//! or as a config option of category `mode`, and its models as a config
//! option of category `model`; Shard lists them as its own catalogs and
//! switches them with `session/set_mode` or `session/set_config_option`,
//! announcing and recording a change once the agent has made it.

use agent_client_protocol_schema::v1::{
    self as acp, AgentResponse, ClientRequest, SessionConfigId, SessionConfigKind,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOptions, SessionModeState, SetSessionConfigOptionRequest,
    SetSessionModeRequest,
};
use shard_platform::conversation::RecordedSettings;
use shard_platform::session_log::EntryBody;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    Effective, ListModelsResult, ListModesResult, ModeChanged, ModelChanged, SetModeResult,
    SetModelResult,
};
use shard_protocol::message::Response;
use shard_protocol::types::{ModeDescriptor, ModelDescriptor};

use super::{Out, Pending, Translator, event, respond};
use crate::agents::runtime::acp::error::AcpError;

/// One choice of a select: its value and what a person reads.
#[derive(Clone, Debug, PartialEq)]
struct Choice {
    value: String,
    name: String,
    description: Option<String>,
}

#[derive(Default)]
pub(super) struct Settings {
    pub mode: String,
    modes: Vec<Choice>,
    /// The config option that holds the mode, when the agent offers modes
    /// that way rather than as the session's modes.
    mode_option: Option<SessionConfigId>,
    model: Option<String>,
    models: Vec<Choice>,
    model_option: Option<SessionConfigId>,
}

/// The choices of a select option, groups flattened, and its value.
fn select(option: &SessionConfigOption) -> Option<(String, Vec<Choice>)> {
    let SessionConfigKind::Select(select) = &option.kind else { return None };
    let options = match &select.options {
        SessionConfigSelectOptions::Ungrouped(options) => options.clone(),
        SessionConfigSelectOptions::Grouped(groups) => {
            groups.iter().flat_map(|group| group.options.clone()).collect()
        }
        _ => Vec::new(),
    };
    let choices = options
        .into_iter()
        .map(|option| Choice {
            value: option.value.0.to_string(),
            name: option.name,
            description: option.description,
        })
        .collect();
    Some((select.current_value.0.to_string(), choices))
}

impl Settings {
    /// What Shard's record last said, until the agent says otherwise.
    pub fn recorded(recorded: &RecordedSettings) -> Self {
        Self {
            mode: recorded.mode.clone().unwrap_or_else(|| "default".to_owned()),
            ..Self::default()
        }
    }

    /// What the agent offers, as its session opened or changed.
    pub fn offered(
        &mut self,
        modes: Option<&SessionModeState>,
        options: Option<&[SessionConfigOption]>,
    ) {
        if let Some(modes) = modes {
            self.mode = modes.current_mode_id.0.to_string();
            self.modes = modes
                .available_modes
                .iter()
                .map(|mode| Choice {
                    value: mode.id.0.to_string(),
                    name: mode.name.clone(),
                    description: mode.description.clone(),
                })
                .collect();
        }
        for option in options.unwrap_or_default() {
            let Some((current, choices)) = select(option) else { continue };
            match option.category {
                Some(SessionConfigOptionCategory::Mode) if modes.is_none() => {
                    self.mode = current;
                    self.modes = choices;
                    self.mode_option = Some(option.id.clone());
                }
                Some(SessionConfigOptionCategory::Model) => {
                    self.model = Some(current);
                    self.models = choices;
                    self.model_option = Some(option.id.clone());
                }
                _ => {}
            }
        }
    }

    pub fn capabilities(&self) -> Vec<String> {
        // The agent's commands may come at any time: the catalog is always there.
        let mut capabilities = vec!["streaming-deltas", "command-catalog"];
        if !self.modes.is_empty() {
            capabilities.extend(["mode-catalog", "mode-switch"]);
        }
        if self.model_option.is_some() {
            capabilities.extend(["model-catalog", "model-switch"]);
        }
        capabilities.into_iter().map(str::to_owned).collect()
    }

    pub fn list_modes(&self) -> Response {
        let mut modes: Vec<ModeDescriptor> = self
            .modes
            .iter()
            .map(|mode| ModeDescriptor {
                name: mode.value.clone(),
                description: mode.description.clone().unwrap_or_else(|| mode.name.clone()),
            })
            .collect();
        if modes.is_empty() {
            modes.push(ModeDescriptor { name: self.mode.clone(), description: String::new() });
        }
        Response::ok("list_modes", ListModesResult { modes, active: self.mode.clone() })
    }

    pub fn list_models(&self, runtime: &str) -> Response {
        let Some(active) = self.active_model(runtime) else {
            return Response::failed("list_models", AcpError::NoModels.into());
        };
        let models = self.models.iter().map(|choice| descriptor(choice, runtime)).collect();
        Response::ok("list_models", ListModelsResult { models, active })
    }

    fn active_model(&self, runtime: &str) -> Option<ModelDescriptor> {
        Some(self.descriptor_of(self.model.as_ref()?, runtime))
    }

    /// A model by its value: as the agent names it, else by the value.
    fn descriptor_of(&self, value: &str, runtime: &str) -> ModelDescriptor {
        match self.models.iter().find(|choice| choice.value == value) {
            Some(choice) => descriptor(choice, runtime),
            None => descriptor(
                &Choice { value: value.to_owned(), name: value.to_owned(), description: None },
                runtime,
            ),
        }
    }

    fn mode_request(&self, session: acp::SessionId, mode: String) -> ClientRequest {
        match &self.mode_option {
            Some(option) => {
                ClientRequest::SetSessionConfigOptionRequest(SetSessionConfigOptionRequest::new(
                    session,
                    option.clone(),
                    SessionConfigOptionValue::value_id(mode),
                ))
            }
            None => ClientRequest::SetSessionModeRequest(SetSessionModeRequest::new(session, mode)),
        }
    }

    /// The model as Shard's record names it: the agent's, else the runtime.
    pub fn model_name(&self, runtime: &str) -> String {
        self.model.clone().unwrap_or_else(|| runtime.to_owned())
    }
}

fn model_request(session: acp::SessionId, option: SessionConfigId, model: String) -> ClientRequest {
    let value = SessionConfigOptionValue::value_id(model);
    ClientRequest::SetSessionConfigOptionRequest(SetSessionConfigOptionRequest::new(
        session, option, value,
    ))
}

/// A choice of Shard's record the agent's new session is set to again.
pub(super) enum Restore {
    Mode(String),
    Model(String),
}

fn descriptor(choice: &Choice, runtime: &str) -> ModelDescriptor {
    ModelDescriptor {
        id: choice.value.clone(),
        provider: runtime.to_owned(),
        model: choice.name.clone(),
        context_window: None,
    }
}

impl Translator {
    pub(super) fn set_mode(&mut self, reply: Option<String>, mode: String) -> Vec<Out> {
        let command = "set_mode";
        let Some(session) = self.session.clone().filter(|_| self.is_ready()) else {
            return vec![respond(reply, Response::failed(command, AcpError::NoSession.into()))];
        };
        let previous = self.settings.mode.clone();
        if mode == previous {
            return vec![respond(
                reply,
                Response::ok(command, SetModeResult { previous_mode: previous, mode }),
            )];
        }
        if !self.settings.modes.iter().any(|choice| choice.value == mode) {
            return vec![respond(
                reply,
                Response::failed(command, AcpError::Unknown("mode", mode).into()),
            )];
        }
        let mode_wanted = mode.clone();
        let request = self.settings.mode_request(session, mode);
        let (id, line) = self.outstanding.request(request);
        self.pending.insert(id, Pending::Mode { reply, previous, mode: mode_wanted });
        vec![Out::Agent(line)]
    }

    pub(super) fn set_model(&mut self, reply: Option<String>, model: String) -> Vec<Out> {
        let command = "set_model";
        let Some(session) = self.session.clone().filter(|_| self.is_ready()) else {
            return vec![respond(reply, Response::failed(command, AcpError::NoSession.into()))];
        };
        let Some(option) = self.settings.model_option.clone() else {
            return vec![respond(reply, Response::failed(command, AcpError::NoModels.into()))];
        };
        if !self.settings.models.iter().any(|choice| choice.value == model) {
            return vec![respond(
                reply,
                Response::failed(command, AcpError::Unknown("model", model).into()),
            )];
        }
        let previous = self.settings.model.clone().unwrap_or_default();
        let (id, line) = self.outstanding.request(model_request(session, option, model));
        self.pending.insert(id, Pending::Model { reply, previous });
        vec![Out::Agent(line)]
    }

    /// The agent answered a switch a client waits on.
    pub(super) fn settled(
        &mut self,
        pending: Pending,
        result: Result<AgentResponse, acp::Error>,
    ) -> Vec<Out> {
        let (reply, command) = match &pending {
            Pending::Mode { reply, .. } => (reply.clone(), "set_mode"),
            Pending::Model { reply, .. } => (reply.clone(), "set_model"),
        };
        let options = match result {
            Err(error) => {
                let refused = AcpError::RefusedSetting(super::wire::said(&error)).into();
                return vec![respond(reply, Response::failed(command, refused))];
            }
            Ok(AgentResponse::SetSessionConfigOptionResponse(answer)) => answer.config_options,
            Ok(_) => Vec::new(),
        };
        let mut out = self.options_now(options);
        match pending {
            Pending::Mode { previous, mode, .. } => {
                out.extend(self.mode_now(mode.clone()));
                let result = SetModeResult { previous_mode: previous, mode };
                out.push(respond(reply, Response::ok(command, result)));
            }
            Pending::Model { previous, .. } => {
                let runtime = self.runtime.clone();
                let previous = self.settings.descriptor_of(&previous, &runtime);
                let Some(active) = self.settings.active_model(&runtime) else { return out };
                let effective = Effective::NextProviderCall;
                out.push(respond(
                    reply,
                    Response::ok(command, SetModelResult { previous, active, effective }),
                ));
            }
        }
        out
    }

    /// The mode and model the session must have: Shard's record for the
    /// process's first session, else what the session being reopened had.
    pub(super) fn wanted_settings(&mut self) -> RecordedSettings {
        if self.reopening {
            let (mode, model) = (self.settings.mode.clone(), self.settings.model.clone());
            return RecordedSettings { mode: Some(mode), model, reasoning_level: None };
        }
        std::mem::take(&mut self.recorded)
    }

    /// Sets a session that opened without them to the `wanted` mode and
    /// model, where the agent offers them: the requests sent.
    pub(super) fn restore(
        &mut self,
        wanted: RecordedSettings,
        session: &acp::SessionId,
    ) -> Vec<Out> {
        let offered =
            |choices: &[Choice], value: &str| choices.iter().any(|choice| choice.value == value);
        let mut requests = Vec::new();
        if let Some(mode) = wanted
            .mode
            .filter(|mode| *mode != self.settings.mode && offered(&self.settings.modes, mode))
        {
            let request = self.settings.mode_request(session.clone(), mode.clone());
            requests.push((request, Restore::Mode(mode)));
        }
        if let (Some(model), Some(option)) = (wanted.model, self.settings.model_option.clone())
            && self.settings.model.as_ref() != Some(&model)
            && offered(&self.settings.models, &model)
        {
            let request = model_request(session.clone(), option, model.clone());
            requests.push((request, Restore::Model(model)));
        }
        requests
            .into_iter()
            .map(|(request, restore)| {
                let (id, line) = self.outstanding.request(request);
                self.restoring.insert(id, restore);
                Out::Agent(line)
            })
            .collect()
    }

    /// The agent answered a restoring request: once all are answered the
    /// session is shown, as it now is.
    pub(super) fn restored(
        &mut self,
        restore: Restore,
        result: Result<AgentResponse, acp::Error>,
    ) -> Vec<Out> {
        match (result, restore) {
            (Err(error), Restore::Mode(mode)) => {
                self.unrestored.push(format!("mode `{mode}` ({})", super::wire::said(&error)));
            }
            (Err(error), Restore::Model(model)) => {
                self.unrestored.push(format!("model `{model}` ({})", super::wire::said(&error)));
            }
            (Ok(AgentResponse::SetSessionConfigOptionResponse(answer)), _) => {
                self.settings.offered(None, Some(&answer.config_options));
            }
            (Ok(_), Restore::Mode(mode)) => self.settings.mode = mode,
            (Ok(_), Restore::Model(model)) => self.settings.model = Some(model),
        }
        if !self.restoring.is_empty() {
            return Vec::new();
        }
        self.session_shown()
    }

    /// The agent says its mode is now `mode`.
    pub(super) fn mode_now(&mut self, mode: String) -> Vec<Out> {
        let previous = std::mem::replace(&mut self.settings.mode, mode);
        self.mode_changed(previous)
    }

    /// The mode changed from `previous` to the one set: announced and
    /// recorded, if it really changed.
    fn mode_changed(&self, previous: String) -> Vec<Out> {
        let mode = self.settings.mode.clone();
        if previous == mode {
            return Vec::new();
        }
        vec![
            Out::Log(EntryBody::Settings {
                mode: Some(mode.clone()),
                model: None,
                reasoning_level: None,
            }),
            event(ServerMessage::ModeChanged(ModeChanged { previous_mode: previous, mode })),
        ]
    }

    /// The agent's config options as they now are: a mode or model that
    /// changed is announced and recorded.
    pub(super) fn options_now(&mut self, options: Vec<SessionConfigOption>) -> Vec<Out> {
        let runtime = self.runtime.clone();
        let (mode, model) = (self.settings.mode.clone(), self.settings.active_model(&runtime));
        self.settings.offered(None, Some(&options));
        let mut out = self.mode_changed(mode);
        let now = self.settings.active_model(&runtime);
        if let (Some(previous), Some(active)) = (model, now)
            && previous != active
        {
            out.push(Out::Log(EntryBody::Settings {
                mode: None,
                model: Some(active.id.clone()),
                reasoning_level: None,
            }));
            let capabilities = Some(self.settings.capabilities());
            out.push(event(ServerMessage::ModelChanged(ModelChanged {
                previous,
                active,
                effective: Effective::NextProviderCall,
                capabilities,
            })));
        }
        out
    }
}
