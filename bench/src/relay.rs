//! The baseline: the least a daemon of this kind could do. Child processes
//! (`shard agent --stdio`, the same agent runtime, or for the ACP scenario
//! the same scripted ACP agent the daemon runs), each one's stdout read
//! line by line, each line sent unchanged as one WebSocket text frame to
//! every client through a bounded queue per client (a client whose queue
//! is full is no longer fed), and every frame a client sends written to the
//! stdin of the child it names. No enrollment, no tagging, no projection,
//! no log, no deadlines.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// Frames queued per client before it counts as stalled: about the 4 MiB
/// the daemon allows a connection, at this agent's ~110 bytes a delta.
const QUEUE: usize = 1 << 15;

type Clients = Arc<Mutex<Vec<mpsc::Sender<Utf8Bytes>>>>;

pub struct Relay {
    pub addr: SocketAddr,
    clients: Clients,
    children: Vec<Child>,
    home: std::path::PathBuf,
}

impl Relay {
    /// A relay of `agents` children, each `bin agent --stdio` (Shard's own
    /// agent): every child's lines go to every client. A client's frame
    /// goes to the child its `"agent"` field names (an index; the first
    /// child without one), unchanged.
    pub async fn start(bin: &Path, agents: usize) -> Result<Relay> {
        Relay::start_with(agents, |cwd| {
            let mut command = Command::new(bin);
            command.args(["agent", "--stdio", "--cwd"]).arg(cwd);
            command
        })
        .await
    }

    /// The same relay of one agent that is not Shard's own: this benchmark
    /// binary as the scripted ACP agent ([`crate::acp`]). Clients speak
    /// ACP to it themselves, through the relay.
    pub async fn start_acp() -> Result<Relay> {
        let exe = std::env::current_exe().context("the benchmark's own path")?;
        Relay::start_with(1, |_| {
            let mut command = Command::new(&exe);
            command.arg(crate::acp::FLAG);
            command
        })
        .await
    }

    /// A relay of `agents` children, each the command `command` makes for
    /// its working directory.
    async fn start_with(agents: usize, command: impl Fn(&Path) -> Command) -> Result<Relay> {
        let home = crate::shard::scratch("relay")?;
        let clients: Clients = Arc::default();
        let mut children = Vec::with_capacity(agents);
        let mut inputs = Vec::with_capacity(agents);
        for index in 0..agents {
            let cwd = home.join(format!("agent-{index}"));
            std::fs::create_dir_all(&cwd)?;
            let agent = Agent::spawn(command(&cwd), &cwd, &clients)?;
            children.push(agent.child);
            inputs.push(agent.input);
        }
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(accept(listener, clients.clone(), Arc::new(inputs)));
        Ok(Relay { addr, clients, children, home })
    }

    /// A client's WebSocket to the relay; `receive_buffer` as for
    /// [`crate::conn::Conn::websocket`].
    pub async fn client(&self, receive_buffer: Option<u32>) -> Result<crate::conn::Conn> {
        let local = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
        crate::conn::Conn::websocket(self.addr, local, None, None, receive_buffer).await
    }

    /// The agents' process ids.
    pub fn agent_pids(&self) -> Vec<u32> {
        self.children.iter().filter_map(Child::id).collect()
    }

    /// Clients connected and receiving.
    pub fn connected(&self) -> usize {
        self.clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Waits until `clients` clients are registered.
    pub async fn wait_for(&self, clients: usize) -> Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.connected() < clients {
            if std::time::Instant::now() > deadline {
                anyhow::bail!("the relay registered {} of {clients} clients", self.connected());
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        Ok(())
    }

    pub async fn stop(mut self) {
        for child in &mut self.children {
            let _ = child.kill().await;
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// One of the relay's children, and the way to its stdin.
struct Agent {
    child: Child,
    input: mpsc::Sender<String>,
}

impl Agent {
    /// Starts `command` in `cwd`: each of its lines goes to every client,
    /// and what clients send it to its stdin.
    fn spawn(mut command: Command, cwd: &Path, clients: &Clients) -> Result<Agent> {
        let mut child = command
            .env("SHARD_HOME", cwd)
            .env("SHARD_LOG", "error")
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting the relay's agent")?;
        let mut stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;

        // The child's lines, each to every client.
        let fan = clients.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let frame = Utf8Bytes::from(line);
                let mut clients = fan.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                clients.retain(|client| client.try_send(frame.clone()).is_ok());
            }
        });

        // What clients send it, to its stdin.
        let (input, mut lines) = mpsc::channel::<String>(64);
        tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err()
                    || stdin.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });
        Ok(Agent { child, input })
    }
}

/// Takes clients for as long as the listener lasts.
async fn accept(listener: TcpListener, clients: Clients, inputs: Arc<Vec<mpsc::Sender<String>>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve(stream, clients.clone(), inputs.clone()));
    }
}

/// One client: fed every child's lines through its own bounded queue, and
/// each frame it sends passed to the child its `"agent"` names.
async fn serve(stream: TcpStream, clients: Clients, inputs: Arc<Vec<mpsc::Sender<String>>>) {
    let Ok(socket) = tokio_tungstenite::accept_async(stream).await else { return };
    let (writer, mut reader) = socket.split();
    let (queue, frames) = mpsc::channel(QUEUE);
    clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(queue);
    tokio::spawn(write(writer, frames));
    while let Some(Ok(message)) = reader.next().await {
        if let Message::Text(text) = message {
            let index = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|value| value["agent"].as_u64())
                .unwrap_or(0) as usize;
            let Some(input) = inputs.get(index) else { continue };
            if input.send(text.as_str().to_owned()).await.is_err() {
                break;
            }
        }
    }
}

/// A client's queue to its socket, batched like any sensible server:
/// queue what is waiting, flush once.
async fn write(
    mut writer: SplitSink<WebSocketStream<TcpStream>, Message>,
    mut frames: mpsc::Receiver<Utf8Bytes>,
) {
    while let Some(frame) = frames.recv().await {
        if writer.feed(Message::Text(frame)).await.is_err() {
            return;
        }
        while let Ok(frame) = frames.try_recv() {
            if writer.feed(Message::Text(frame)).await.is_err() {
                return;
            }
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

/// A relay controller leaves once its `turns` turns have started: closing
/// a socket with unread data resets it, which could lose prompts the relay
/// had not read yet.
pub async fn leave(mut control: crate::conn::Conn, turns: usize) -> Result<()> {
    let mut started = 0;
    while started < turns {
        if control.recv().await?.contains("\"turn_start\"") {
            started += 1;
        }
    }
    Ok(())
}

/// An ACP controller leaves likewise, once its agent streams the turn.
pub async fn leave_acp(mut control: crate::conn::Conn) -> Result<()> {
    while !control.recv().await?.contains("\"agent_message_chunk\"") {}
    Ok(())
}
