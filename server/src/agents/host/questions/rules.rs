//! The rules an agent's questions are answered by: how long one waits
//! when nobody is there (`headless_policy`), what its sandbox answers
//! itself (`allow_inside`), and which allows from away need a passkey
//! (`[step_up]`). Fixed for the agent's life; judged by what a call does.

use shard_protocol::ClientMessage;
use shard_protocol::agent::{
    ChoiceIntent, Decision, PendingKind, PermissionAnswer, PermissionResponse,
};
use shard_protocol::approvals::Answerer;
use shard_protocol::orchestrator::HeadlessPolicy;

use crate::agents::approvals::StepUp;

/// How this agent's questions are answered when nobody is there, and which
/// allows need a passkey: fixed for the agent's life.
pub(in crate::agents::host) struct Rules {
    /// `headless_policy` from `agent.create`.
    pub headless: Option<HeadlessPolicy>,
    /// `--headless-timeout`.
    pub headless_timeout: std::time::Duration,
    /// `[step_up]`, if any allows need a passkey.
    pub step_up: Option<StepUp>,
    /// The agent's working directory and runtime: what a call does is
    /// judged against them.
    pub cwd: std::path::PathBuf,
    pub runtime: String,
}

impl Rules {
    /// The rules of the agent `manifest` describes, under the daemon's.
    pub fn of(
        manifest: &crate::agents::manifest::Manifest,
        context: &crate::agents::host::Context,
    ) -> Self {
        Self {
            headless: manifest.headless_policy,
            headless_timeout: context.headless_timeout,
            step_up: context.step_up.clone(),
            cwd: manifest.cwd.clone().into(),
            runtime: manifest.runtime_id().to_owned(),
        }
    }

    /// How long a question stays open once nobody can answer it: the
    /// daemon's timeout, nothing under `deny` and `allow_if_rule_matches`
    /// (the runtime already ran whatever a rule allows), forever under
    /// `queue`.
    pub fn headless_wait(&self) -> Option<std::time::Duration> {
        match self.headless {
            None => Some(self.headless_timeout),
            Some(HeadlessPolicy::Deny | HeadlessPolicy::AllowIfRuleMatches) => {
                Some(std::time::Duration::ZERO)
            }
            Some(HeadlessPolicy::Queue) => None,
        }
    }

    /// The allow `request` gets without asking, if the agent's sandbox
    /// holds what it would do (`allow_inside`, docs/SANDBOX.md "Fewer
    /// questions"): a command, which runs inside the sandbox, or writes
    /// that all land in the agent's own directory. Never a network
    /// question, a write that names no file or leaves the directory, or a
    /// call whose effect is not known.
    pub fn sandbox_holds(&self, request: &PendingKind) -> Option<PermissionAnswer> {
        use crate::agents::effect::{self, Effect};
        let PendingKind::Permission(request) = request else { return None };
        if request.tool_name == shard_protocol::sandbox::NETWORK_TOOL {
            return None;
        }
        let cwd = self.cwd.as_path();
        let held = match Effect::of(request, &self.runtime) {
            Effect::Runs => true,
            Effect::Writes(paths) => {
                !paths.is_empty()
                    && paths.iter().all(|path| {
                        effect::inside(cwd, path)
                            && effect::inside(cwd, &effect::resolved(&cwd.join(path)))
                    })
            }
            Effect::Looks | Effect::Delegates | Effect::Unknown => false,
        };
        if !held {
            return None;
        }
        let allow = PermissionAnswer::Decision(Decision::Allow);
        if request.accepts(&allow) {
            return Some(allow);
        }
        let choice =
            request.choices.iter().flatten().find(|choice| choice.intent == ChoiceIntent::Allow)?;
        Some(PermissionAnswer::Choice(choice.id.clone()))
    }

    /// Whether `answer` to `request` from `answerer` is an allow from away
    /// (a browser or a notification) that `[step_up]` guards.
    pub fn needs_step_up(
        &self,
        request: &shard_protocol::agent::PermissionRequest,
        answer: &PermissionAnswer,
        answerer: &Answerer,
    ) -> bool {
        let Some(rule) = &self.step_up else { return false };
        let from_away = crate::agents::approvals::from_away(&answerer.source);
        let allows = match answer {
            PermissionAnswer::Decision(decision) => *decision != Decision::Deny,
            PermissionAnswer::Choice(id) => request
                .choices
                .iter()
                .flatten()
                .find(|choice| choice.id == *id)
                .is_some_and(|choice| choice.intent != ChoiceIntent::Deny),
        };
        from_away && allows && rule.requires(request, &self.cwd, &self.runtime)
    }
}

/// The answer the sandbox gives a question it holds.
pub(super) fn held_answer(request_id: &str, answer: PermissionAnswer) -> ClientMessage {
    ClientMessage::PermissionResponse(PermissionResponse {
        request_id: request_id.to_owned(),
        answer,
        reason: Some("the agent's sandbox holds it (allow_inside)".to_owned()),
    })
}
