//! An agent that is not Shard's own: a scripted ACP agent (the Agent Client
//! Protocol, JSON-RPC 2.0, one JSON object per line on its stdin and
//! stdout), run as `shard-bench --acp-agent`. The daemon runs it as a
//! configured runtime, the bare relay as its child; the ACP scenario
//! streams its `burst: N` turns through both.
//!
//! It answers `initialize` (offering `loadSession`), `session/new`,
//! `session/load` of its one session [`SESSION`] (what a daemon asks of an
//! agent it starts again after hibernating or reaping it; there is no
//! history to replay) and `session/prompt`, ignores notifications
//! (`session/cancel`) and refuses anything else (`-32601`). A prompt of
//! `burst: N` streams N `agent_message_chunk` updates of text `tick-1 `,
//! `tick-2 `, … as fast as the pipe takes them (one buffered write per 64
//! KiB, not per line), then answers `end_turn`: the least an agent can
//! cost, so that what is measured is the stream's way to the clients.
//! `burst: 1` is the tiny prompt: one chunk, at once.

use std::io::{BufRead, BufWriter, Write};
use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

/// The hidden flag that makes the benchmark binary this agent.
pub const FLAG: &str = "--acp-agent";
/// The runtime's id in the daemon's `config.toml`.
pub const RUNTIME: &str = "fast";
/// The one session it opens.
pub const SESSION: &str = "bench-1";

/// A daemon's `config.toml` naming this agent (`exe`, the benchmark binary)
/// as the runtime [`RUNTIME`].
pub fn config(exe: &Path) -> String {
    // A JSON string is a TOML basic string (the same escapes).
    let command = Value::from(exe.to_string_lossy()).to_string();
    format!(
        "[[runtimes]]\nid = \"{RUNTIME}\"\nprotocol = \"acp\"\ncommand = {command}\nargs = [\"{FLAG}\"]\n"
    )
}

/// Serves ACP on stdin and stdout until stdin closes.
pub fn serve() -> Result<()> {
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    for line in stdin.lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
        // A notification (no id) needs no answer; a response is not asked for.
        let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) else {
            continue;
        };
        let result = match method {
            "initialize" => json!({
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": true},
                "authMethods": [],
            }),
            "session/new" => json!({"sessionId": SESSION}),
            "session/load" if message["params"]["sessionId"] == SESSION => json!({}),
            "session/load" => {
                refuse(&mut out, id, -32002, "no such session".to_owned())?;
                continue;
            }
            "session/prompt" => {
                let text = message["params"]["prompt"][0]["text"].as_str().unwrap_or_default();
                let count = text
                    .strip_prefix("burst:")
                    .and_then(|count| count.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                for tick in 1..=count {
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SESSION}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"tick-{tick} "}}}}}}}}"#
                    )?;
                }
                json!({"stopReason": "end_turn"})
            }
            _ => {
                refuse(&mut out, id, -32601, format!("no method {method}"))?;
                continue;
            }
        };
        writeln!(out, "{}", json!({"jsonrpc": "2.0", "id": id, "result": result}))?;
        out.flush()?;
    }
    Ok(())
}

/// A JSON-RPC error answering request `id`.
fn refuse(out: &mut impl Write, id: &Value, code: i64, message: String) -> Result<()> {
    let error = json!({"code": code, "message": message});
    writeln!(out, "{}", json!({"jsonrpc": "2.0", "id": id, "error": error}))?;
    out.flush()?;
    Ok(())
}
