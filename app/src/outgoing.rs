//! A command as the page puts it on the wire: the envelope's `type`, `id`
//! and `agent_id` written here around the payload's own JSON, for the
//! commands the page sends and no others. Encoding `ClientMessage` whole
//! (serde's internally tagged enum, with the envelope's fields flattened
//! into it) would put an encoder for every command in the first load, the
//! daemon's and the local tools' commands too, each through serde's
//! flattening machinery; this costs the bundle only what the page uses.
//! The frames are the same JSON (tested against the protocol crate's own
//! encoding below).

use serde::Serialize;
use shard_protocol::ClientMessage;
use shard_protocol::envelope::MessageSet;

/// `message` with request id `id`, routed to `agent_id`, as one JSON text;
/// `None` for a command the page never sends.
pub fn encode(message: &ClientMessage, id: &str, agent_id: Option<&str>) -> Option<String> {
    use ClientMessage as C;
    let payload = match message {
        C::Abort(empty)
        | C::ListModes(empty)
        | C::ListModels(empty)
        | C::ListCommands(empty)
        | C::ListReasoningLevels(empty)
        | C::RecallSteer(empty)
        | C::AgentList(empty)
        | C::NodeList(empty) => json(empty),
        C::RuntimeList(query) => json(query),
        C::Prompt(prompt) => json(prompt),
        C::SetMode(set) => json(set),
        C::SetModel(set) => json(set),
        C::SetReasoningLevel(set) => json(set),
        C::SessionOp(op) => json(op),
        C::PermissionResponse(answer) => json(answer),
        C::UiResponse(answer) => json(answer),
        C::AgentCreate(create) => json(create),
        C::AgentAttach(attach) => json(attach),
        C::AgentDetach(target) | C::AgentTerminate(target) => json(target),
        C::AgentKill(kill) => json(kill),
        C::WorkspaceCreate(create) => json(create),
        C::WorkspaceAttach(attach) => json(attach),
        C::WorkspaceList(list) => json(list),
        C::WorkspaceStatus(status) => json(status),
        C::WorkspaceRetire(retire) => json(retire),
        C::WorkspaceCommit(action) | C::WorkspaceMerge(action) | C::WorkspacePush(action) => {
            json(action)
        }
        C::SubagentStatus(status) => json(status),
        C::SubagentStop(stop) => json(stop),
        C::UsageAgent(query) => json(query),
        C::ApprovalList(list) => json(list),
        C::SandboxRevoke(revoke) => json(revoke),
        C::SessionActivate(activate) => json(activate),
        C::SearchQuery(query) => json(query),
        C::ClientPresence(presence) => json(presence),
        C::FleetWatch(watch) => json(watch),
        C::BudgetList(list) => json(list),
        C::BudgetSet(set) => json(set),
        _ => None,
    }?;
    // Every payload is an object: its members follow the envelope's.
    let members = payload.strip_prefix('{')?.strip_suffix('}')?;
    let mut frame = format!("{{\"type\":\"{}\",\"id\":{}", message.type_name(), json(id)?);
    if !members.is_empty() {
        frame.push(',');
        frame.push_str(members);
    }
    // Last, as the protocol crate writes it.
    if let Some(agent_id) = agent_id {
        frame.push_str(",\"agent_id\":");
        frame.push_str(&json(agent_id)?);
    }
    frame.push('}');
    Some(frame)
}

fn json<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    serde_json::to_string(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use shard_protocol::Envelope;

    /// What the protocol crate makes of `message` with the same envelope.
    fn reference(message: ClientMessage, id: &str, agent_id: Option<&str>) -> Value {
        let envelope = Envelope {
            id: Some(id.to_owned()),
            agent_id: agent_id.map(str::to_owned),
            seq: None,
            message,
        };
        serde_json::from_str(&envelope.to_json()).expect("reference")
    }

    #[test]
    fn every_command_the_page_sends_is_the_json_the_protocol_crate_makes() {
        // One of each shape the page sends, decoded from the wire as a
        // client would write it, so that no field is left out.
        let frames = [
            json!({"type": "prompt", "message": "hi \"there\"\n", "streaming_behavior": "follow_up"}),
            json!({"type": "abort"}),
            json!({"type": "list_reasoning_levels"}),
            json!({"type": "set_mode", "mode": "plan"}),
            json!({"type": "session_op", "op": "fork", "args": {"from_entry_id": "e-1"}}),
            json!({"type": "permission_response", "request_id": "perm-1", "decision": "allow"}),
            json!({"type": "ui_response", "request_id": "ui-1", "value": "yes"}),
            json!({"type": "agent.create", "cwd": "/tmp/x", "name": "n"}),
            json!({"type": "agent.attach", "agent_id": "a-1", "role": "interactive", "after_seq": 7}),
            json!({"type": "agent.terminate", "agent_id": "a-1"}),
            json!({"type": "workspace.commit", "workspace_id": "w-1", "message": "m", "confirm": true}),
            json!({"type": "client.presence", "visible": false}),
            json!({"type": "search.query", "query": "needle"}),
            json!({"type": "fleet.watch", "watch": true}),
            json!({"type": "node.list"}),
            json!({"type": "agent.create", "cwd": "/tmp/x", "node": "box"}),
            json!({"type": "budget.list", "agent_id": "a-1"}),
            json!({"type": "budget.set", "scope": "agent", "agent_id": "a-1", "period": "day",
                "usd": 2.5, "tokens": 1000, "this_period": true}),
        ];
        for frame in frames {
            let mut frame = frame;
            frame["id"] = json!("x");
            let envelope = Envelope::<ClientMessage>::from_json(&frame.to_string())
                .unwrap_or_else(|error| panic!("{frame}: {error:?}"));
            let message = envelope.message;
            for agent_id in [None, Some("agent-\"1\"")] {
                let ours = encode(&message, "r-3", agent_id).expect("sent by the page");
                let ours: Value = serde_json::from_str(&ours).expect("JSON");
                assert_eq!(ours, reference(message.clone(), "r-3", agent_id), "{frame}");
            }
        }
    }

    #[test]
    fn a_command_the_page_never_sends_is_not_encoded() {
        let frame = json!({"type": "daemon.stats", "id": "x"});
        let envelope = Envelope::<ClientMessage>::from_json(&frame.to_string()).expect("decoded");
        assert_eq!(encode(&envelope.message, "r-1", None), None);
    }
}
