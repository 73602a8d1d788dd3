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

use super::{Out, Translator, event, respond};

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

impl Translator {
    /// The agent listed its commands anew. Before Shard's `sync` clients
    /// learn them by asking; after it, they are told.
    pub(super) fn commands_now(&mut self, update: acp::AvailableCommandsUpdate) -> Vec<Out> {
        let commands: Vec<AgentCommand> = update
            .available_commands
            .into_iter()
            .filter(|offered| !offered.name.trim_start_matches('/').is_empty())
            .take(MAX_COMMANDS)
            .map(command)
            .collect();
        if commands == self.commands {
            return Vec::new();
        }
        self.commands = commands;
        if !self.is_ready() {
            return Vec::new();
        }
        let changed = AgentCommands { commands: self.commands.clone() };
        vec![event(ServerMessage::CommandsChanged(changed))]
    }

    pub(super) fn list_commands(&self, id: Option<String>) -> Out {
        let commands = AgentCommands { commands: self.commands.clone() };
        respond(id, Response::ok("list_commands", commands))
    }
}
