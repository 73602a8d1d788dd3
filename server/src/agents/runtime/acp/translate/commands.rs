//! The commands the agent offers (its slash commands, ACP
//! `available_commands_update`): kept as the agent last listed them,
//! answered to `list_commands` and announced to clients as
//! `commands_changed`. Using one is a prompt that starts with `/` and its
//! name, which goes to the agent as typed.

use agent_client_protocol_schema::v1::{self as acp, AvailableCommandInput};
use shard_platform::truncate_chars;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{AgentCommand, AgentCommands};
use shard_protocol::message::Response;

use super::{Out, event, respond};

/// The most commands kept, and the characters of a name, a description
/// and a hint: enough for any agent's menu, never a page of text.
const MAX_COMMANDS: usize = 256;
const MAX_NAME: usize = 64;
const MAX_TEXT: usize = 300;

fn command(offered: acp::AvailableCommand) -> AgentCommand {
    let hint = match offered.input {
        Some(AvailableCommandInput::Unstructured(input)) => Some(input.hint),
        _ => None,
    };
    AgentCommand {
        name: truncate_chars(offered.name.trim_start_matches('/'), MAX_NAME),
        description: truncate_chars(&offered.description, MAX_TEXT),
        hint: hint.filter(|hint| !hint.is_empty()).map(|hint| truncate_chars(&hint, MAX_TEXT)),
    }
}

/// The commands the agent offers, as it last listed them.
#[derive(Default)]
pub(super) struct Commands {
    offered: Vec<AgentCommand>,
}

impl Commands {
    /// The agent listed its commands anew. Before Shard's `sync` (`told`
    /// false) clients learn them by asking; after it, they are told.
    pub(super) fn now(&mut self, update: acp::AvailableCommandsUpdate, told: bool) -> Vec<Out> {
        let commands: Vec<AgentCommand> = update
            .available_commands
            .into_iter()
            .filter(|offered| !offered.name.trim_start_matches('/').is_empty())
            .take(MAX_COMMANDS)
            .map(command)
            .collect();
        if commands == self.offered {
            return Vec::new();
        }
        self.offered = commands;
        if !told {
            return Vec::new();
        }
        let changed = AgentCommands { commands: self.offered.clone() };
        vec![event(ServerMessage::CommandsChanged(changed))]
    }

    /// The answer to `list_commands`.
    pub(super) fn list(&self, id: Option<String>) -> Out {
        let commands = AgentCommands { commands: self.offered.clone() };
        respond(id, Response::ok("list_commands", commands))
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol_schema::v1::UnstructuredCommandInput;
    use serde_json::Value;

    use super::*;

    fn offered(names: &[&str]) -> acp::AvailableCommandsUpdate {
        let commands = names
            .iter()
            .map(|name| {
                acp::AvailableCommand::new(*name, format!("does {}", name.trim_start_matches('/')))
                    .input(AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(
                        "a hint",
                    )))
            })
            .collect();
        acp::AvailableCommandsUpdate::new(commands)
    }

    fn json(out: &Out) -> Value {
        let Out::Host(line) = out else { panic!("not for the host: {out:?}") };
        serde_json::from_str(line).expect("a JSON line")
    }

    #[test]
    fn commands_are_kept_without_their_slash_and_told_once_clients_are_there() {
        let mut commands = Commands::default();
        assert!(commands.now(offered(&["/review", "/"]), false).is_empty(), "not told yet");
        let listed = json(&commands.list(Some("c1".into())));
        assert_eq!(listed["id"], "c1");
        assert_eq!(listed["data"]["commands"][0]["name"], "review");
        assert_eq!(listed["data"]["commands"][0]["hint"], "a hint");
        assert_eq!(listed["data"]["commands"].as_array().map(Vec::len), Some(1));

        assert!(commands.now(offered(&["review"]), true).is_empty(), "the same list again");
        let changed = commands.now(offered(&["review", "plan"]), true);
        assert_eq!(json(&changed[0])["type"], "commands_changed");
        assert_eq!(json(&changed[0])["commands"][1]["name"], "plan");
    }

    #[test]
    fn a_flood_of_commands_is_bounded() {
        let names: Vec<String> = (0..MAX_COMMANDS + 10).map(|n| format!("c{n}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut commands = Commands::default();
        commands.now(offered(&names), false);
        let listed = json(&commands.list(None));
        assert_eq!(listed["data"]["commands"].as_array().map(Vec::len), Some(MAX_COMMANDS));
    }
}
