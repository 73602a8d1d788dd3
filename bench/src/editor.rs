//! An editor through `shard acp` against a unix-socket client: the same
//! agent's `burst: N` turn read by both at once, in the same run. A local
//! tool attached to the agent reads the daemon's events as they are; the
//! editor reads them after `shard acp` has turned each into an ACP
//! `session/update` (one more process, one more pipe; pieces that queued
//! behind one another reach the editor as one). What is compared is each
//! reader's deltas per second, from the prompt to the turn's last delta's
//! text; the target is the editor at 0.8× the socket or better.
//!
//! The editor is driven here line by line (JSON-RPC 2.0, one object per
//! line), as any ACP client speaks: `initialize`, then `session/load` of
//! the agent a control connection created and prompts.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::Args;
use crate::conn::read_burst;
use crate::report::{median, ratio};
use crate::shard::Shard;

/// Rounds, and deltas per round.
fn sizes(short: bool) -> (usize, u64) {
    if short { (3, 2_000) } else { (10, 20_000) }
}

/// The longest one round may take.
const ROUND: Duration = Duration::from_secs(120);

struct Editor {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Editor {
    async fn start(args: &Args, shard: &Shard) -> Result<Editor> {
        let mut child = Command::new(&args.shard)
            .arg("acp")
            .arg("--home")
            .arg(shard.home())
            .env("SHARD_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting shard acp")?;
        let stdin = child.stdin.take().context("stdin")?;
        let lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        Ok(Editor { _child: child, stdin, lines })
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Result<Value> {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin.write_all(format!("{line}\n").as_bytes()).await?;
        loop {
            let line = self.lines.next_line().await?.context("shard acp ended")?;
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == id && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    bail!("{method}: {error}");
                }
                return Ok(message["result"].clone());
            }
        }
    }

    /// Reads to the `count`th delta's text, checking every `tick-K ` comes
    /// in order. `shard acp` may give several deltas queued behind one
    /// another as one chunk, so the ticks are counted in the text, not the
    /// chunks.
    async fn read_burst(&mut self, count: u64) -> Result<(bool, u64)> {
        let (mut seen, mut in_order, mut chunks) = (0u64, true, 0u64);
        while seen < count {
            let line =
                match tokio::time::timeout(Duration::from_secs(10), self.lines.next_line()).await {
                    Ok(line) => line?.context("shard acp ended")?,
                    Err(_) => bail!("the editor saw {seen} of {count} ticks"),
                };
            if !line.contains("\"agent_message_chunk\"") {
                continue;
            }
            chunks += 1;
            for tick in line.split("tick-").skip(1) {
                let number = tick.split(' ').next().and_then(|number| number.parse::<u64>().ok());
                seen += 1;
                in_order &= number == Some(seen);
            }
        }
        Ok((in_order, chunks))
    }
}

pub async fn run(args: &Args) -> Result<Vec<String>> {
    let (rounds, deltas) = sizes(args.short);
    println!("\nEditors: a turn through shard acp against a unix-socket client");
    let shard = Shard::start(&args.shard, None, None).await?;
    let mut control = shard.unix().await?;
    let agent = shard.create_agent(&mut control).await?;
    drop(control);
    // The local tool: attached to act as well as to read, it sends the
    // prompts (their answers come among the events, which its reader skips).
    let mut socket = shard.unix().await?;
    socket.call(json!({"type": "agent.attach", "agent_id": agent}), "attach").await?;
    let mut editor = Editor::start(args, &shard).await?;
    editor
        .request(1, "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}))
        .await?;
    editor
        .request(2, "session/load", json!({"sessionId": agent, "cwd": "/", "mcpServers": []}))
        .await?;

    let mut broken = Vec::new();
    let (mut by_socket, mut by_editor, mut chunks) = (Vec::new(), Vec::new(), 0u64);
    for round in 0..rounds {
        let prompt =
            json!({"type": "prompt", "agent_id": agent, "message": format!("burst: {deltas}")});
        let started = Instant::now();
        socket.send(&prompt).await?;
        let (socket_read, editor_read) = tokio::time::timeout(ROUND, async {
            tokio::join!(
                async {
                    let seen = read_burst(&mut socket).await;
                    (seen, started.elapsed())
                },
                async {
                    let in_order = editor.read_burst(deltas).await;
                    (in_order, started.elapsed())
                }
            )
        })
        .await
        .context("a round took too long")?;
        let (seen, socket_took) = (socket_read.0?, socket_read.1);
        let ((in_order, round_chunks), editor_took) = (editor_read.0?, editor_read.1);
        chunks += round_chunks;
        if seen.deltas != deltas || !seen.in_order || !in_order {
            broken.push(format!(
                "editors: round {round}: the socket read {} deltas (in order: {}), the editor in order: {in_order}",
                seen.deltas, seen.in_order
            ));
        }
        by_socket.push(deltas as f64 / socket_took.as_secs_f64());
        by_editor.push(deltas as f64 / editor_took.as_secs_f64());
        socket.until(|message| message["type"] == "turn_end").await?;
    }
    let (socket, editor) = (median(&mut by_socket), median(&mut by_editor));
    println!(
        "  {rounds} turns of {deltas} deltas, median: unix socket {:.0} deltas/s, editor through shard acp {:.0} deltas/s: {} (target: at least 0.8×)",
        socket,
        editor,
        ratio(editor, socket)
    );
    println!(
        "  the editor got them in {chunks} chunks ({:.1} deltas a chunk: what queued behind one another went as one)",
        (rounds as u64 * deltas) as f64 / chunks.max(1) as f64
    );
    if editor < 0.8 * socket {
        println!("  below target");
    }
    shard.stop().await?;
    Ok(broken)
}
