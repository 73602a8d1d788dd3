//! Modes and models. An ACP agent offers its modes as the session's modes
//! or as a config option of category `mode`, and its models as a config
//! option of category `model`; Shard lists them as its own catalogs and
//! switches them with `session/set_mode` or `session/set_config_option`,
//! announcing and recording a change once the agent has made it. A session
//! that opens in another mode or model than Shard's record holds (or than
//! the session reopened had) is set back to it before clients see it.

use std::collections::HashMap;

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

use super::{Out, error_event, event, respond};
use crate::agents::runtime::acp::error::AcpError;
use crate::agents::runtime::acp::wire::{self, Outstanding};

/// One choice of a select: its value and what a person reads.
#[derive(Clone, Debug, PartialEq)]
struct Choice {
    value: String,
    name: String,
    description: Option<String>,
}

/// The modes and models as the agent offers them, and which it is in.
#[derive(Default)]
struct Catalog {
    mode: String,
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

impl Catalog {
    /// What Shard's record last said, until the agent says otherwise.
    fn recorded(recorded: &RecordedSettings) -> Self {
        Self {
            mode: recorded.mode.clone().unwrap_or_else(|| "default".to_owned()),
            ..Self::default()
        }
    }

    /// What the agent offers, as its session opened or changed.
    fn offered(
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

    fn capabilities(&self) -> Vec<String> {
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

    fn list_modes(&self) -> Response {
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

    fn list_models(&self, runtime: &str) -> Response {
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
    fn model_name(&self, runtime: &str) -> String {
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
enum Restore {
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

/// A request to the agent that a client waits on.
enum Switch {
    Mode { reply: Option<String>, previous: String, mode: String },
    Model { reply: Option<String>, previous: String },
}

/// The session's mode and model: what the agent offers, what Shard's
/// record wants of a new session, and the switches under way.
pub(super) struct Settings {
    /// The runtime's id: names the model in Shard's record until the
    /// agent names one.
    runtime: String,
    catalog: Catalog,
    /// The mode and model Shard's record holds, until the first session
    /// opens (and is set to them).
    recorded: RecordedSettings,
    /// Choices of Shard's record being set again, by request id, before
    /// the session is shown (clients wait for the session, not for these);
    /// what the agent refused, said once it is.
    restoring: HashMap<i64, Restore>,
    unrestored: Vec<String>,
    /// Switches a client waits on, by request id.
    switches: HashMap<i64, Switch>,
}

/// What an answer of the agent's to a request of the settings gives.
pub(super) enum Answered {
    /// Lines for the host (a switch settled, or nothing yet).
    Lines(Vec<Out>),
    /// The last choice being set again is answered: the session can be
    /// shown.
    Restored,
}

impl Settings {
    /// What Shard's `recorded` settings say for a session of `runtime`,
    /// until the agent says otherwise.
    pub(super) fn new(runtime: String, recorded: RecordedSettings) -> Self {
        Self {
            runtime,
            catalog: Catalog::recorded(&recorded),
            recorded,
            restoring: HashMap::new(),
            unrestored: Vec::new(),
            switches: HashMap::new(),
        }
    }

    pub(super) fn runtime(&self) -> &str {
        &self.runtime
    }

    /// The mode the session is in.
    pub(super) fn mode(&self) -> &str {
        &self.catalog.mode
    }

    /// Shard's capabilities for what the agent offers.
    pub(super) fn capabilities(&self) -> Vec<String> {
        self.catalog.capabilities()
    }

    /// What the agent offers, as its session opened.
    pub(super) fn offered(
        &mut self,
        modes: Option<&SessionModeState>,
        options: Option<&[SessionConfigOption]>,
    ) {
        self.catalog.offered(modes, options);
    }

    /// The answer to `list_modes`.
    pub(super) fn list_modes(&self) -> Response {
        self.catalog.list_modes()
    }

    /// The answer to `list_models`.
    pub(super) fn list_models(&self) -> Response {
        self.catalog.list_models(&self.runtime)
    }

    /// The model as Shard's record names it: the agent's, else the runtime.
    pub(super) fn model_name(&self) -> String {
        self.catalog.model_name(&self.runtime)
    }

    /// `set_mode`, in the `session` open (if it is).
    pub(super) fn set_mode(
        &mut self,
        outstanding: &mut Outstanding,
        reply: Option<String>,
        mode: String,
        session: Option<&acp::SessionId>,
    ) -> Vec<Out> {
        let command = "set_mode";
        let Some(session) = session.cloned() else {
            return vec![respond(reply, Response::failed(command, AcpError::NoSession.into()))];
        };
        let previous = self.catalog.mode.clone();
        if mode == previous {
            return vec![respond(
                reply,
                Response::ok(command, SetModeResult { previous_mode: previous, mode }),
            )];
        }
        if !self.catalog.modes.iter().any(|choice| choice.value == mode) {
            return vec![respond(
                reply,
                Response::failed(command, AcpError::Unknown("mode", mode).into()),
            )];
        }
        let mode_wanted = mode.clone();
        let request = self.catalog.mode_request(session, mode);
        let (id, line) = outstanding.request(request);
        self.switches.insert(id, Switch::Mode { reply, previous, mode: mode_wanted });
        vec![Out::Agent(line)]
    }

    /// `set_model`, in the `session` open (if it is).
    pub(super) fn set_model(
        &mut self,
        outstanding: &mut Outstanding,
        reply: Option<String>,
        model: String,
        session: Option<&acp::SessionId>,
    ) -> Vec<Out> {
        let command = "set_model";
        let Some(session) = session.cloned() else {
            return vec![respond(reply, Response::failed(command, AcpError::NoSession.into()))];
        };
        let Some(option) = self.catalog.model_option.clone() else {
            return vec![respond(reply, Response::failed(command, AcpError::NoModels.into()))];
        };
        if !self.catalog.models.iter().any(|choice| choice.value == model) {
            return vec![respond(
                reply,
                Response::failed(command, AcpError::Unknown("model", model).into()),
            )];
        }
        let previous = self.catalog.model.clone().unwrap_or_default();
        let (id, line) = outstanding.request(model_request(session, option, model));
        self.switches.insert(id, Switch::Model { reply, previous });
        vec![Out::Agent(line)]
    }

    /// Whether request `id` is one of the settings' (a switch, or a
    /// choice being set again).
    pub(super) fn awaits(&self, id: i64) -> bool {
        self.restoring.contains_key(&id) || self.switches.contains_key(&id)
    }

    /// The agent answered request `id`, one of the settings'.
    pub(super) fn answered(
        &mut self,
        id: i64,
        result: Result<AgentResponse, acp::Error>,
    ) -> Answered {
        if let Some(restore) = self.restoring.remove(&id) {
            self.restored(restore, result);
            return match self.restoring.is_empty() {
                true => Answered::Restored,
                false => Answered::Lines(Vec::new()),
            };
        }
        match self.switches.remove(&id) {
            Some(switch) => Answered::Lines(self.settled(switch, result)),
            None => Answered::Lines(Vec::new()),
        }
    }

    /// The agent answered a switch a client waits on.
    fn settled(&mut self, switch: Switch, result: Result<AgentResponse, acp::Error>) -> Vec<Out> {
        let (reply, command) = match &switch {
            Switch::Mode { reply, .. } => (reply.clone(), "set_mode"),
            Switch::Model { reply, .. } => (reply.clone(), "set_model"),
        };
        let options = match result {
            Err(error) => {
                let refused = AcpError::RefusedSetting(wire::said(&error)).into();
                return vec![respond(reply, Response::failed(command, refused))];
            }
            Ok(AgentResponse::SetSessionConfigOptionResponse(answer)) => answer.config_options,
            Ok(_) => Vec::new(),
        };
        let mut out = self.options_now(options);
        match switch {
            Switch::Mode { previous, mode, .. } => {
                out.extend(self.mode_now(mode.clone()));
                let result = SetModeResult { previous_mode: previous, mode };
                out.push(respond(reply, Response::ok(command, result)));
            }
            Switch::Model { previous, .. } => {
                let previous = self.catalog.descriptor_of(&previous, &self.runtime);
                let Some(active) = self.catalog.active_model(&self.runtime) else { return out };
                let effective = Effective::NextProviderCall;
                out.push(respond(
                    reply,
                    Response::ok(command, SetModelResult { previous, active, effective }),
                ));
            }
        }
        out
    }

    /// The mode and model a session opening must have: Shard's record for
    /// the process's first session, else (`reopening`) what the session
    /// being reopened had.
    pub(super) fn wanted(&mut self, reopening: bool) -> RecordedSettings {
        if reopening {
            let (mode, model) = (self.catalog.mode.clone(), self.catalog.model.clone());
            return RecordedSettings { mode: Some(mode), model, reasoning_level: None };
        }
        std::mem::take(&mut self.recorded)
    }

    /// Sets a session that opened without them to the `wanted` mode and
    /// model, where the agent offers them: the requests sent.
    pub(super) fn restore(
        &mut self,
        outstanding: &mut Outstanding,
        wanted: RecordedSettings,
        session: &acp::SessionId,
    ) -> Vec<Out> {
        let offered =
            |choices: &[Choice], value: &str| choices.iter().any(|choice| choice.value == value);
        let catalog = &self.catalog;
        let mut requests = Vec::new();
        if let Some(mode) =
            wanted.mode.filter(|mode| *mode != catalog.mode && offered(&catalog.modes, mode))
        {
            let request = catalog.mode_request(session.clone(), mode.clone());
            requests.push((request, Restore::Mode(mode)));
        }
        if let (Some(model), Some(option)) = (wanted.model, catalog.model_option.clone())
            && catalog.model.as_ref() != Some(&model)
            && offered(&catalog.models, &model)
        {
            let request = model_request(session.clone(), option, model.clone());
            requests.push((request, Restore::Model(model)));
        }
        requests
            .into_iter()
            .map(|(request, restore)| {
                let (id, line) = outstanding.request(request);
                self.restoring.insert(id, restore);
                Out::Agent(line)
            })
            .collect()
    }

    /// The agent answered a restoring request.
    fn restored(&mut self, restore: Restore, result: Result<AgentResponse, acp::Error>) {
        match (result, restore) {
            (Err(error), Restore::Mode(mode)) => {
                self.unrestored.push(format!("mode `{mode}` ({})", wire::said(&error)));
            }
            (Err(error), Restore::Model(model)) => {
                self.unrestored.push(format!("model `{model}` ({})", wire::said(&error)));
            }
            (Ok(AgentResponse::SetSessionConfigOptionResponse(answer)), _) => {
                self.catalog.offered(None, Some(&answer.config_options));
            }
            (Ok(_), Restore::Mode(mode)) => self.catalog.mode = mode,
            (Ok(_), Restore::Model(model)) => self.catalog.model = Some(model),
        }
    }

    /// What the agent refused to be set back to, said plainly, once.
    pub(super) fn unrestored_said(&mut self) -> Vec<Out> {
        let unrestored = std::mem::take(&mut self.unrestored);
        unrestored.into_iter().map(|what| error_event(AcpError::NotRestored(what).into())).collect()
    }

    /// The agent says its mode is now `mode`.
    pub(super) fn mode_now(&mut self, mode: String) -> Vec<Out> {
        let previous = std::mem::replace(&mut self.catalog.mode, mode);
        self.mode_changed(previous)
    }

    /// The mode changed from `previous` to the one set: announced and
    /// recorded, if it really changed.
    fn mode_changed(&self, previous: String) -> Vec<Out> {
        let mode = self.catalog.mode.clone();
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
        let runtime = &self.runtime;
        let (mode, model) = (self.catalog.mode.clone(), self.catalog.active_model(runtime));
        self.catalog.offered(None, Some(&options));
        let mut out = self.mode_changed(mode);
        let now = self.catalog.active_model(&self.runtime);
        if let (Some(previous), Some(active)) = (model, now)
            && previous != active
        {
            out.push(Out::Log(EntryBody::Settings {
                mode: None,
                model: Some(active.id.clone()),
                reasoning_level: None,
            }));
            let capabilities = Some(self.catalog.capabilities());
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{host_line as host, reply, sent};
    use super::*;

    fn modes() -> SessionModeState {
        serde_json::from_value(json!({"currentModeId": "default", "availableModes": [
            {"id": "default", "name": "Default"}, {"id": "plan", "name": "Plan"}]}))
        .expect("modes")
    }

    fn models(current: &str) -> Vec<SessionConfigOption> {
        serde_json::from_value(json!([{"id": "model", "name": "Model", "category": "model",
            "type": "select", "currentValue": current,
            "options": [{"value": "m1", "name": "Small"}, {"value": "m2", "name": "Large"}]}]))
        .expect("options")
    }

    fn session() -> acp::SessionId {
        acp::SessionId::new("s-1")
    }

    #[test]
    fn a_new_session_is_set_back_to_the_recorded_mode_and_what_is_refused_is_said() {
        let recorded = RecordedSettings {
            mode: Some("plan".to_owned()),
            model: Some("m2".to_owned()),
            reasoning_level: None,
        };
        let mut settings = Settings::new("fake".to_owned(), recorded);
        assert_eq!(settings.mode(), "plan", "the record's until the agent says");
        let mut outstanding = Outstanding::default();
        let wanted = settings.wanted(false);
        settings.offered(Some(&modes()), Some(&models("m1")));
        assert_eq!(settings.mode(), "default");
        let requests = settings.restore(&mut outstanding, wanted, &session());
        let [mode, model] = [sent(&requests[..1]), sent(&requests[1..])];
        assert_eq!(
            (mode["method"].as_str(), mode["params"]["modeId"].as_str()),
            (Some("session/set_mode"), Some("plan"))
        );
        assert_eq!(model["params"]["value"], "m2");

        let (id, result) = reply(&mut outstanding, &mode, json!({}));
        assert!(settings.awaits(id));
        assert!(matches!(settings.answered(id, result), Answered::Lines(out) if out.is_empty()));
        let refused = json!({"code": -32602, "message": "no such model"});
        let (id, result) = reply(&mut outstanding, &model, refused);
        assert!(matches!(settings.answered(id, result), Answered::Restored));
        assert_eq!(settings.mode(), "plan");
        assert_eq!(settings.model_name(), "m1");
        let said = settings.unrestored_said();
        assert!(host(&said[0])["message"].as_str().unwrap().contains("model `m2`"), "{said:?}");
        assert!(settings.unrestored_said().is_empty(), "said once");
        assert!(settings.wanted(false).mode.is_none(), "the record is wanted once");
        assert_eq!(settings.wanted(true).mode.as_deref(), Some("plan"), "a reopening's own");
    }

    #[test]
    fn a_switch_goes_through_the_agent_and_is_answered_once_it_is_made() {
        let mut settings = Settings::new("fake".to_owned(), RecordedSettings::default());
        settings.offered(Some(&modes()), Some(&models("m1")));
        let mut outstanding = Outstanding::default();
        let closed = settings.set_mode(&mut outstanding, Some("c".into()), "plan".into(), None);
        assert_eq!(host(&closed[0])["error"]["code"], "CONFLICT");
        let unknown = settings.set_mode(&mut outstanding, None, "yolo".into(), Some(&session()));
        assert_eq!(host(&unknown[0])["error"]["code"], "NOT_FOUND");
        let same = settings.set_mode(&mut outstanding, None, "default".into(), Some(&session()));
        assert_eq!(host(&same[0])["success"], true);

        let asked = settings.set_mode(&mut outstanding, None, "plan".into(), Some(&session()));
        let (id, result) = reply(&mut outstanding, &sent(&asked), json!({}));
        let Answered::Lines(out) = settings.answered(id, result) else { panic!("a switch") };
        assert!(
            matches!(&out[0], Out::Log(EntryBody::Settings { mode: Some(mode), .. }) if mode == "plan")
        );
        assert_eq!(host(&out[1])["type"], "mode_changed");
        assert_eq!(host(&out[2])["data"], json!({"previous_mode": "default", "mode": "plan"}));

        let asked = settings.set_model(&mut outstanding, None, "m2".into(), Some(&session()));
        let refused = json!({"code": -32603, "message": "busy"});
        let (id, result) = reply(&mut outstanding, &sent(&asked), refused);
        let Answered::Lines(out) = settings.answered(id, result) else { panic!("a switch") };
        assert_eq!(host(&out[0])["error"]["message"], "the agent refused the change: busy");
        let asked = settings.set_model(&mut outstanding, None, "m2".into(), Some(&session()));
        let (id, result) =
            reply(&mut outstanding, &sent(&asked), json!({"configOptions": models("m2")}));
        let Answered::Lines(out) = settings.answered(id, result) else { panic!("a switch") };
        assert_eq!(host(&out[1])["type"], "model_changed");
        assert_eq!(host(&out[2])["data"]["active"]["model"], "Large");
        assert_eq!(settings.model_name(), "m2");
    }

    #[test]
    fn an_agent_without_models_says_so_and_names_the_runtime() {
        let settings = Settings::new("fake".to_owned(), RecordedSettings::default());
        assert_eq!(settings.model_name(), "fake");
        let listed = host(&respond(None, settings.list_models()));
        assert_eq!(listed["error"]["code"], "NOT_FOUND");
        assert_eq!(settings.capabilities(), ["streaming-deltas", "command-catalog"]);
        let modes = host(&respond(None, settings.list_modes()));
        assert_eq!(modes["data"]["active"], "default");
    }
}
