//! `shard enroll` and `shard sessions`: local administration of the running
//! daemon over its unix socket (local trust, §4.2).

use std::time::Duration;

use anyhow::{Context, bail};
use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{EnrollResult, RevokeResult, RevokeSession, SessionsResult};

use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone, clap::Subcommand)]
pub enum SessionsCommand {
    /// List the live browser sessions.
    List,
    /// Revoke one session (its open tabs disconnect at once), or all.
    Revoke {
        /// The session id from `shard sessions list`.
        #[arg(required_unless_present = "all")]
        session_id: Option<String>,
        #[arg(long, conflicts_with = "session_id")]
        all: bool,
    },
}

/// Sends one command and returns its response's data.
async fn call(command: ClientMessage) -> anyhow::Result<serde_json::Value> {
    let home = shard_platform::config::shard_home()?;
    let path = home.join("daemon.sock");
    let mut stream = tokio::net::UnixStream::connect(&path).await.with_context(|| {
        format!("no daemon is listening on {} (start one with `shard daemon`)", path.display())
    })?;
    stream.write_all(&frame(&Envelope::new(command).with_id("cli").to_json())).await?;
    let mut decoder = LineDecoder::default();
    let mut buffer = vec![0; 16 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let read = tokio::time::timeout_at(deadline, stream.read(&mut buffer))
            .await
            .context("the daemon did not answer in time")??;
        if read == 0 {
            bail!("the daemon closed the connection");
        }
        decoder.feed(&buffer[..read]);
        while let Some(line) = decoder.next_line() {
            let Ok(line) = line else { continue };
            let Ok(envelope) = Envelope::<ServerMessage>::from_json(&line) else { continue };
            if let ServerMessage::Error(error) = &envelope.message
                && error.fatal == Some(true)
            {
                bail!("the daemon refused: {}", error.message);
            }
            if let (Some("cli"), ServerMessage::Response(response)) =
                (envelope.id.as_deref(), envelope.message)
            {
                let response: Response = response;
                return response
                    .data::<serde_json::Value>()
                    .map_err(|error| anyhow::anyhow!("{error}"));
            }
        }
    }
}

pub async fn request() -> anyhow::Result<String> {
    let data = call(ClientMessage::DaemonEnroll(Default::default())).await?;
    let result: EnrollResult = serde_json::from_value(data)?;
    Ok(result.url)
}

fn when(ms: u64) -> String {
    let now = crate::clock::now_ms();
    let (delta, suffix) = if ms >= now { (ms - now, "from now") } else { (now - ms, "ago") };
    let seconds = delta / 1000;
    let amount = match seconds {
        0..=119 => format!("{seconds} s"),
        120..=7199 => format!("{} min", seconds / 60),
        7200..=172_799 => format!("{} h", seconds / 3600),
        _ => format!("{} days", seconds / 86_400),
    };
    format!("{amount} {suffix}")
}

pub async fn sessions(command: SessionsCommand) -> anyhow::Result<()> {
    match command {
        SessionsCommand::List => {
            let data = call(ClientMessage::DaemonSessions(Default::default())).await?;
            let result: SessionsResult = serde_json::from_value(data)?;
            if result.sessions.is_empty() {
                println!("no browser sessions");
            }
            for session in result.sessions {
                let push =
                    session.push.map(|host| format!("  push via {host}")).unwrap_or_default();
                println!(
                    "{}  {}  created {}  last used {}  expires {}  {} open{push}",
                    session.session_id,
                    session.principal_id,
                    when(session.created_at),
                    when(session.last_seen_at),
                    when(session.expires_at),
                    session.connections
                );
            }
        }
        SessionsCommand::Revoke { session_id, all } => {
            let target = match (session_id, all) {
                (_, true) => RevokeSession::All,
                (Some(id), false) => RevokeSession::One(id),
                (None, false) => bail!("name a session id, or --all"),
            };
            let data = call(ClientMessage::DaemonRevokeSession(target)).await?;
            let result: RevokeResult = serde_json::from_value(data)?;
            for id in &result.revoked {
                println!("revoked {id}");
            }
        }
    }
    Ok(())
}
