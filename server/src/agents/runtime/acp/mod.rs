//! Agents that speak the Agent Client Protocol, run as Shard agents at the
//! runtime seam (docs/ARCHITECTURE.md, "The runtime seam"): [`wire`] reads
//! and writes ACP's lines, [`translate`] turns them into Shard's per-agent
//! protocol and back, and [`process`] runs the agent with a bridge between
//! the two; [`error`] is what they refuse, mapped to the wire's errors.

pub mod error;
pub mod fs;
pub mod process;
pub mod translate;
pub mod wire;

pub use self::process::AcpSpawner;

#[cfg(test)]
mod tests {
    //! The wire against a real ACP process: the scripted agent of the
    //! black-box tests (tests/fixtures/acp), driven line by line.

    use std::process::Stdio;

    use agent_client_protocol_schema::ProtocolVersion;
    use agent_client_protocol_schema::v1::{
        AgentNotification, AgentRequest, AgentResponse, ClientRequest, ClientResponse,
        InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest,
        RequestPermissionOutcome, RequestPermissionResponse, SelectedPermissionOutcome,
        SessionUpdate, StopReason, ToolCallContent,
    };
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::wire::{self, Incoming, Outstanding};

    struct Driven {
        child: tokio::process::Child,
        stdin: tokio::process::ChildStdin,
        lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
        outstanding: Outstanding,
    }

    impl Driven {
        fn start(cwd: &std::path::Path) -> Self {
            let script =
                concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/acp/fake_acp_agent.py");
            let mut child = tokio::process::Command::new("python3")
                .arg(script)
                .current_dir(cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("python3 runs the scripted agent");
            let stdin = child.stdin.take().expect("stdin");
            let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
            Self { child, stdin, lines, outstanding: Outstanding::default() }
        }

        async fn send(&mut self, line: &str) {
            self.stdin.write_all(line.as_bytes()).await.expect("write");
        }

        async fn ask(&mut self, request: ClientRequest) -> i64 {
            let (id, line) = self.outstanding.request(request);
            self.send(&line).await;
            id
        }

        async fn next(&mut self) -> Incoming {
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(20), self.lines.next_line());
            let line = read.await.expect("the agent answers").expect("read").expect("a line");
            wire::decode(&line, &mut self.outstanding)
        }

        /// Reads until the answer to `id`, keeping the updates seen before it.
        async fn answer_to(&mut self, id: i64) -> (AgentResponse, Vec<SessionUpdate>) {
            let mut updates = Vec::new();
            loop {
                match self.next().await {
                    Incoming::Response { id: answered, result, .. } if answered == id => {
                        return (*result.expect("a result"), updates);
                    }
                    Incoming::Notification(notification) => {
                        if let AgentNotification::SessionNotification(update) = *notification {
                            updates.push(update.update);
                        }
                    }
                    Incoming::TextChunk { text, thinking } => {
                        let chunk =
                            agent_client_protocol_schema::v1::ContentChunk::new(text.into());
                        updates.push(match thinking {
                            true => SessionUpdate::AgentThoughtChunk(chunk),
                            false => SessionUpdate::AgentMessageChunk(chunk),
                        });
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
    }

    #[tokio::test]
    async fn a_scripted_agent_streams_asks_permission_and_runs_what_was_allowed() {
        let cwd = tempfile::tempdir().expect("cwd");
        let mut agent = Driven::start(cwd.path());
        let id = agent
            .ask(ClientRequest::InitializeRequest(InitializeRequest::new(ProtocolVersion::V1)))
            .await;
        let (AgentResponse::InitializeResponse(initialized), _) = agent.answer_to(id).await else {
            panic!("not initialized");
        };
        assert_eq!(initialized.protocol_version, ProtocolVersion::V1);
        let id =
            agent.ask(ClientRequest::NewSessionRequest(NewSessionRequest::new(cwd.path()))).await;
        let (AgentResponse::NewSessionResponse(session), _) = agent.answer_to(id).await else {
            panic!("no session");
        };
        let session_id = session.session_id;

        let hello = PromptRequest::new(session_id.clone(), vec!["hello world".into()]);
        let id = agent.ask(ClientRequest::PromptRequest(hello)).await;
        let (AgentResponse::PromptResponse(done), updates) = agent.answer_to(id).await else {
            panic!("no prompt result");
        };
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        let chunks =
            updates.iter().filter(|update| matches!(update, SessionUpdate::AgentMessageChunk(_)));
        assert!(chunks.count() >= 2, "streamed in chunks: {updates:?}");

        // A tool call that asks first (the scripted agent's first request
        // has id 0); the option is chosen by its kind, never its id.
        let run = PromptRequest::new(session_id, vec!["run: echo from-the-tool".into()]);
        let prompt = agent.ask(ClientRequest::PromptRequest(run)).await;
        let (asked, request) = loop {
            if let Incoming::Request(asked, request) = agent.next().await {
                break (asked, request);
            }
        };
        let AgentRequest::RequestPermissionRequest(request) = *request else {
            panic!("not a permission request");
        };
        assert_eq!(asked, agent_client_protocol_schema::v1::RequestId::Number(0));
        let allow =
            request.options.iter().find(|option| option.kind == PermissionOptionKind::AllowOnce);
        let chosen = allow.expect("an allow-once option").option_id.clone();
        let outcome = RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(chosen));
        let response =
            ClientResponse::RequestPermissionResponse(RequestPermissionResponse::new(outcome));
        agent.send(&wire::answer(asked, Ok(response))).await;
        let (AgentResponse::PromptResponse(done), updates) = agent.answer_to(prompt).await else {
            panic!("no prompt result");
        };
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        let output: Vec<String> = updates
            .iter()
            .filter_map(|update| match update {
                SessionUpdate::ToolCallUpdate(update) => update.fields.content.clone(),
                _ => None,
            })
            .flatten()
            .filter_map(|content| match content {
                ToolCallContent::Content(content) => Some(format!("{:?}", content.content)),
                _ => None,
            })
            .collect();
        assert!(output.iter().any(|text| text.contains("from-the-tool")), "{output:?}");
        drop(agent.stdin);
        let status = agent.child.wait().await.expect("exit");
        assert!(status.success(), "the agent ends when its input does: {status}");
    }
}
