//! `shard enroll`: asks the running daemon, over its unix socket, for a new
//! single-use browser enrollment URL.

use std::time::Duration;

use anyhow::{Context, bail};
use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::EnrollResult;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub async fn request() -> anyhow::Result<String> {
    let home = shard_agent::config::shard_home()?;
    let path = home.join("daemon.sock");
    let mut stream = tokio::net::UnixStream::connect(&path).await.with_context(|| {
        format!("no daemon is listening on {} (start one with `shard daemon`)", path.display())
    })?;
    let command = Envelope::new(ClientMessage::DaemonEnroll(Default::default())).with_id("enroll");
    stream.write_all(&frame(&command.to_json())).await?;
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
            if let (Some("enroll"), ServerMessage::Response(response)) =
                (envelope.id.as_deref(), envelope.message)
            {
                let response: Response = response;
                let result: EnrollResult =
                    response.data().map_err(|error| anyhow::anyhow!("{error}"))?;
                return Ok(result.url);
            }
        }
    }
}
