//! A node's workspaces, through the hub (docs/NODES.md). `workspace.create`
//! with a `node` makes the workspace, and its agent, on the node; every
//! other workspace command names a node's workspace by its id here,
//! `<id>@<node>`, and goes to the node under its id there, as the command
//! of one of the node's local clients. What the node answers, and the
//! `workspace_*` events it tells of, come back with each workspace and
//! agent id made the hub's, and each workspace marked with its node. What
//! is here reads and rewrites; the commands send (`commands::workspace`).

use serde_json::Value;
use shard_protocol::sandbox::SandboxMode;
use shard_protocol::workspace::WorkspaceSummary;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};

use super::link::plain_id;

/// The most workspaces of one node a hub's `workspace.list` shows.
pub const MAX_LISTED: usize = 1000;

/// How long the hub waits for a node's answer to a workspace command: a
/// push may take two minutes on the network, after git's own steps.
pub const DEADLINE: std::time::Duration = std::time::Duration::from_secs(240);

/// How long a hub's `workspace.list` waits for each node's.
pub const LIST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);

/// The node a workspace command is for: `workspace.create`'s `node`, or
/// the node of the workspace it names; `None`: the daemon's own.
pub fn node_of(message: &ClientMessage) -> Option<&str> {
    let workspace_id = match message {
        ClientMessage::WorkspaceCreate(request) => return request.node.as_deref(),
        ClientMessage::WorkspaceAttach(request) => &request.workspace_id,
        ClientMessage::WorkspaceStatus(request) => &request.workspace_id,
        ClientMessage::WorkspaceRetire(request) => &request.workspace_id,
        ClientMessage::WorkspaceCommit(request)
        | ClientMessage::WorkspaceMerge(request)
        | ClientMessage::WorkspacePush(request) => &request.workspace_id,
        _ => return None,
    };
    // One that is not the node's own plain id is no node's here (and goes
    // to the daemon's own, which has no such workspace): trust does not
    // chain through a node to its nodes.
    let (node, plain) = shard_platform::nodes::split(workspace_id)?;
    plain_id(plain).then_some(node)
}

/// Each of a node's listed workspaces as the hub keeps it, at most
/// [`MAX_LISTED`]: one with an id that is not plain, or that is itself
/// another node's, is left out.
pub fn kept(workspaces: Vec<Value>, node: &str) -> Vec<WorkspaceSummary> {
    let kept = workspaces.into_iter().filter_map(|mut workspace| {
        let chained = workspace.get("node").is_some_and(|node| !node.is_null());
        (!chained && qualify(&mut workspace, node).is_ok()).then_some(workspace)
    });
    let kept = kept.take(MAX_LISTED).map(serde_json::from_value::<WorkspaceSummary>);
    kept.filter_map(Result::ok).collect()
}

/// The sandbox mode a launch (`workspace.create` or `.attach`) asks for;
/// `None` for a command that launches nothing.
pub fn launch(message: &ClientMessage) -> Option<Option<SandboxMode>> {
    let launch = match message {
        ClientMessage::WorkspaceCreate(request) => &request.launch,
        ClientMessage::WorkspaceAttach(request) => &request.launch,
        _ => return None,
    };
    Some(launch.sandbox.as_ref().and_then(|sandbox| sandbox.mode))
}

/// A node's `workspace_*` event as the hub's clients get it: ids made the
/// hub's; `None` for any other event, or one whose ids are not plain.
pub fn told(node: &str, message: ServerMessage) -> Option<String> {
    if !matches!(
        message,
        ServerMessage::WorkspaceCreated(_)
            | ServerMessage::WorkspaceAttached(_)
            | ServerMessage::WorkspaceRetired(_)
            | ServerMessage::WorkspaceConflict(_)
            | ServerMessage::WorkspaceUpdated(_)
    ) {
        return None;
    }
    let mut event: Value = serde_json::from_str(&Envelope::new(message).to_json()).ok()?;
    // Another node's, told on by this one: trust does not chain.
    if event.pointer("/workspace/node").is_some_and(|node| !node.is_null()) {
        return None;
    }
    qualify(&mut event, node).ok()?;
    Some(event.to_string())
}

/// The command as the node takes it: its own workspace id, and no node.
pub fn for_the_node(mut message: ClientMessage) -> ClientMessage {
    let plain = |workspace_id: &mut String| {
        if let Some((_, plain)) = shard_platform::nodes::split(workspace_id) {
            *workspace_id = plain.to_owned();
        }
    };
    match &mut message {
        ClientMessage::WorkspaceCreate(request) => request.node = None,
        ClientMessage::WorkspaceAttach(request) => plain(&mut request.workspace_id),
        ClientMessage::WorkspaceStatus(request) => plain(&mut request.workspace_id),
        ClientMessage::WorkspaceRetire(request) => plain(&mut request.workspace_id),
        ClientMessage::WorkspaceCommit(request)
        | ClientMessage::WorkspaceMerge(request)
        | ClientMessage::WorkspacePush(request) => plain(&mut request.workspace_id),
        _ => {}
    }
    message
}

/// A launch with its agent's sandbox narrowed to `mode`.
pub fn with_mode(mut message: ClientMessage, mode: SandboxMode) -> ClientMessage {
    let launch = match &mut message {
        ClientMessage::WorkspaceCreate(request) => &mut request.launch,
        ClientMessage::WorkspaceAttach(request) => &mut request.launch,
        _ => return message,
    };
    launch.sandbox.get_or_insert_with(Default::default).mode = Some(mode);
    message
}

/// A node's answer or event made the hub's: every `workspace_id` and
/// `agent_id`, and each of `agent_ids`, qualified by `node`, and each
/// workspace (an object with a `workspace_id` and a `lifecycle`) marked
/// with its node. An id that is not plain fails it: trust does not chain.
pub fn qualify(value: &mut Value, node: &str) -> Result<(), String> {
    let one = |id: &mut Value| match id {
        Value::String(plain) if plain_id(plain) => {
            *plain = shard_platform::nodes::qualified(node, plain);
            Ok(())
        }
        Value::Null => Ok(()),
        _ => Err(format!("node `{node}` named a workspace or agent by an id that is not plain")),
    };
    match value {
        Value::Object(map) => {
            let workspace = map.contains_key("workspace_id") && map.contains_key("lifecycle");
            for (key, child) in map.iter_mut() {
                match key.as_str() {
                    "workspace_id" | "agent_id" => one(child)?,
                    "agent_ids" => match child {
                        Value::Array(ids) => ids.iter_mut().try_for_each(one)?,
                        _ => return Err(format!("node `{node}` sent agent ids that are no list")),
                    },
                    _ => qualify(child, node)?,
                }
            }
            if workspace {
                map.insert("node".to_owned(), Value::String(node.to_owned()));
            }
        }
        Value::Array(items) => items.iter_mut().try_for_each(|item| qualify(item, node))?,
        // No node's text is longer here than a path may be.
        Value::String(text) => super::link::cut(text, super::link::MAX_CWD),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_nodes_ids_are_qualified_and_its_workspaces_marked() {
        let mut answer = json!({
            "agent_id": "agent-1", "session_id": "s-1",
            "workspace": {"workspace_id": "ws-1", "lifecycle": "active", "cwd": "/w",
                          "agent_ids": ["agent-1", "agent-2"], "created_at": 1},
        });
        qualify(&mut answer, "box").expect("plain ids");
        assert_eq!(answer["agent_id"], "agent-1@box");
        assert_eq!(answer["session_id"], "s-1", "only workspace and agent ids");
        assert_eq!(answer["workspace"]["workspace_id"], "ws-1@box");
        assert_eq!(answer["workspace"]["agent_ids"], json!(["agent-1@box", "agent-2@box"]));
        assert_eq!(answer["workspace"]["node"], "box");
    }

    #[test]
    fn a_nodes_text_is_cut_to_a_paths_length() {
        let mut event = json!({"workspace": {"workspace_id": "ws-1", "lifecycle": "active",
                                             "label": "x".repeat(100_000)}});
        qualify(&mut event, "box").expect("plain ids");
        let label = event["workspace"]["label"].as_str().expect("label");
        assert_eq!(label.chars().count(), super::super::link::MAX_CWD);
    }

    #[test]
    fn an_id_that_is_not_plain_fails_the_whole_answer() {
        for bad in [json!({"workspace_id": "ws-1@other"}), json!({"agent_ids": ["../x"]})] {
            let mut answer = json!({"workspaces": [bad]});
            assert!(qualify(&mut answer, "box").is_err(), "{answer}");
        }
    }

    #[test]
    fn a_workspace_command_goes_to_the_node_of_its_id_under_its_id_there() {
        let line = r#"{"type":"workspace.status","id":"1","workspace_id":"ws-1@box"}"#;
        let status = Envelope::<ClientMessage>::from_json(line).expect("a command").message;
        assert_eq!(node_of(&status), Some("box"));
        let ClientMessage::WorkspaceStatus(sent) = for_the_node(status) else { panic!() };
        assert_eq!(sent.workspace_id, "ws-1");
    }
}
