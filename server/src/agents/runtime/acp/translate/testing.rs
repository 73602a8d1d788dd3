//! What the translator's tests and its parts' tests read its output with.

use agent_client_protocol_schema::v1::{self as acp, AgentResponse};
use serde_json::{Value, json};

use super::Out;
use crate::agents::runtime::acp::wire::{self, Incoming, Outstanding};

/// The host's lines among `out`, as JSON.
pub fn host(out: &[Out]) -> Vec<Value> {
    out.iter()
        .filter_map(|out| match out {
            Out::Host(line) => Some(serde_json::from_str(line).expect("a JSON line")),
            _ => None,
        })
        .collect()
}

/// The agent's lines among `out`, as JSON.
pub fn agent(out: &[Out]) -> Vec<Value> {
    out.iter()
        .filter_map(|out| match out {
            Out::Agent(line) => Some(serde_json::from_str(line).expect("a JSON line")),
            _ => None,
        })
        .collect()
}

pub fn types(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|line| line["type"].as_str().unwrap_or("?")).collect()
}

/// `out`, a line for the host, as JSON.
pub fn host_line(out: &Out) -> Value {
    let Out::Host(line) = out else { panic!("not for the host: {out:?}") };
    serde_json::from_str(line).expect("a JSON line")
}

/// `out`, a line for the agent, as JSON.
pub fn agent_line(out: &Out) -> Value {
    let Out::Agent(line) = out else { panic!("not for the agent: {out:?}") };
    serde_json::from_str(line).expect("a JSON line")
}

/// The one line for the agent among `out`, as JSON.
pub fn sent(out: &[Out]) -> Value {
    let [Out::Agent(line)] = out else { panic!("one line for the agent: {out:?}") };
    serde_json::from_str(line).expect("a JSON line")
}

/// The agent's answer to `request`, as the wire reads it.
pub fn reply(
    outstanding: &mut Outstanding,
    request: &Value,
    answer: Value,
) -> (i64, Result<AgentResponse, acp::Error>) {
    let mut line = json!({"jsonrpc": "2.0", "id": request["id"]});
    let key = if answer.get("code").is_some() { "error" } else { "result" };
    line[key] = answer;
    let Incoming::Response { id, result, .. } = wire::decode(&line.to_string(), outstanding) else {
        panic!("not an answer");
    };
    (id, result.map(|response| *response))
}
