//! Each agent's approval history (`approval.list`, docs/PROTOCOL-NOTES.md):
//! every permission and UI question, what it asked, who answered it, from
//! where, and when.
//!
//! `agents/<id>/approvals.jsonl` (0600) is written by the agent's host, one
//! line when a question is asked and one when it is resolved, each appended
//! whole in one write, so a reader (any connection, without waking the
//! host) never sees half a record it cannot skip. Past
//! [`REWRITE_AFTER`] lines the newest [`KEPT`] questions are folded into a
//! new file that replaces the old one atomically.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shard_protocol::approvals::{Answerer, ApprovalRecord};

use super::manifest::agent_dir;

/// Questions kept per agent, newest: enough to review a day's work.
pub const KEPT: usize = 200;
/// Lines the file may reach before it is folded down to [`KEPT`] records.
const REWRITE_AFTER: usize = 4 * KEPT;
/// The most of a question's text kept (bytes).
pub const PROMPT_LIMIT: usize = 500;
const FILE: &str = "approvals.jsonl";

/// One line of the file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Asked(ApprovalRecord),
    Resolved { request_id: String, resolved_at: u64, outcome: String, answered_by: Answerer },
}

/// The writer, owned by the agent's host.
pub struct ApprovalLog {
    path: PathBuf,
    /// Lines in the file, once counted.
    lines: Option<usize>,
}

impl ApprovalLog {
    pub fn new(home: &Path, agent_id: &str) -> Self {
        Self { path: path(home, agent_id), lines: None }
    }

    pub fn asked(&mut self, record: ApprovalRecord) {
        self.append(&Line::Asked(record));
    }

    pub fn resolved(&mut self, request_id: &str, at: u64, outcome: String, by: Answerer) {
        let line = Line::Resolved {
            request_id: request_id.to_owned(),
            resolved_at: at,
            outcome,
            answered_by: by,
        };
        self.append(&line);
    }

    /// A failure is logged and the question goes on: the history is a
    /// record, never a reason to hold up an answer.
    fn append(&mut self, line: &Line) {
        if let Err(error) = self.try_append(line) {
            tracing::warn!(path = %self.path.display(), %error, "cannot record an approval");
        }
    }

    fn try_append(&mut self, line: &Line) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        let lines = match self.lines {
            Some(lines) => lines,
            None => count_lines(&self.path),
        };
        let mut file = OpenOptions::new().create(true).append(true).mode(0o600).open(&self.path)?;
        file.write_all(&bytes)?;
        self.lines = Some(lines + 1);
        if lines + 1 > REWRITE_AFTER {
            let records = read(&self.path, KEPT);
            let mut folded = Vec::new();
            for record in records.into_iter().rev() {
                serde_json::to_writer(&mut folded, &Line::Asked(record))
                    .map_err(std::io::Error::other)?;
                folded.push(b'\n');
            }
            crate::home::replace_private(&self.path, &folded)?;
            self.lines = Some(KEPT.min(lines + 1));
        }
        Ok(())
    }
}

fn path(home: &Path, agent_id: &str) -> PathBuf {
    agent_dir(home, agent_id).join(FILE)
}

fn count_lines(path: &Path) -> usize {
    File::open(path).map(|file| BufReader::new(file).lines().count()).unwrap_or(0)
}

/// The newest `limit` questions of `agent_id`, newest first.
pub fn list(home: &Path, agent_id: &str, limit: usize) -> Vec<ApprovalRecord> {
    read(&path(home, agent_id), limit)
}

fn read(path: &Path, limit: usize) -> Vec<ApprovalRecord> {
    let Ok(file) = File::open(path) else { return Vec::new() };
    let mut records: Vec<ApprovalRecord> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    // A line that does not parse (a write cut short) is skipped.
    for line in BufReader::new(file).lines().map_while(Result::ok) {
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Asked(record)) => {
                at.insert(record.request_id.clone(), records.len());
                records.push(record);
            }
            Ok(Line::Resolved { request_id, resolved_at, outcome, answered_by }) => {
                if let Some(record) = at.get(&request_id).map(|&index| &mut records[index])
                    && record.resolved_at.is_none()
                {
                    record.resolved_at = Some(resolved_at);
                    record.outcome = Some(outcome);
                    record.answered_by = Some(answered_by);
                }
            }
            Err(_) => {}
        }
    }
    records.into_iter().rev().take(limit).collect()
}

/// `text` cleaned like every diagnostic and cut to [`PROMPT_LIMIT`] bytes.
/// Which `allow`s from a browser or a notification need a fresh passkey
/// assertion first (`[step_up]` in `config.toml`; docs/SECURITY.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepUp {
    pub tools: Vec<String>,
    pub writes_outside_cwd: bool,
}

impl StepUp {
    /// Whether allowing `request` of an agent working in `cwd` needs it.
    pub fn requires(
        &self,
        request: &shard_protocol::agent::PermissionRequest,
        cwd: &std::path::Path,
    ) -> bool {
        if self.tools.contains(&request.tool_name) {
            return true;
        }
        let writes = matches!(request.tool_name.as_str(), "write" | "edit");
        if !(writes && self.writes_outside_cwd) {
            return false;
        }
        let path = ["path", "file_path"]
            .iter()
            .find_map(|key| request.input.get(*key).and_then(serde_json::Value::as_str));
        match path {
            Some(path) => !inside(cwd, std::path::Path::new(path)),
            // A write that names no path: nothing shows it stays inside.
            None => true,
        }
    }
}

/// Whether `path` (relative to `cwd`, or absolute) is inside `cwd`, read
/// lexically: a `..` anywhere counts as outside.
fn inside(cwd: &std::path::Path, path: &std::path::Path) -> bool {
    use std::path::Component;
    if path.components().any(|part| matches!(part, Component::ParentDir)) {
        return false;
    }
    !path.is_absolute() || path.starts_with(cwd)
}

pub fn bounded_prompt(text: &str) -> String {
    let clean = shard_protocol::diagnostic::diagnostic(text);
    if clean.len() <= PROMPT_LIMIT {
        return clean;
    }
    let mut end = PROMPT_LIMIT - '…'.len_utf8();
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &clean[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_up_covers_the_named_tools_and_writes_that_leave_the_cwd() {
        let rule = StepUp { tools: vec!["bash".into()], writes_outside_cwd: true };
        let call =
            |tool: &str, input: serde_json::Value| shard_protocol::agent::PermissionRequest {
                request_id: "r".into(),
                tool_name: tool.into(),
                input,
                prompt: String::new(),
                options: vec![],
                details: None,
                choices: None,
            };
        let cwd = std::path::Path::new("/work/project");
        assert!(rule.requires(&call("bash", serde_json::json!({"command": "ls"})), cwd));
        for (path, outside) in [
            ("src/main.rs", false),
            ("/work/project/src/main.rs", false),
            ("/etc/passwd", true),
            ("../other/file", true),
            ("src/../../escape", true),
            ("/work/project-other/x", true),
        ] {
            let write = call("write", serde_json::json!({"path": path, "content": ""}));
            assert_eq!(rule.requires(&write, cwd), outside, "{path}");
        }
        assert!(!rule.requires(&call("read", serde_json::json!({"path": "/etc/passwd"})), cwd));
        let lenient = StepUp { tools: vec![], writes_outside_cwd: false };
        assert!(!lenient.requires(&call("write", serde_json::json!({"path": "/etc/x"})), cwd));
    }
    use shard_protocol::approvals::ApprovalKind;

    fn asked(id: &str, at: u64) -> ApprovalRecord {
        ApprovalRecord {
            request_id: id.to_owned(),
            kind: ApprovalKind::Permission,
            tool_name: Some("bash".into()),
            prompt: format!("run {id}"),
            asked_at: at,
            resolved_at: None,
            outcome: None,
            answered_by: None,
        }
    }

    #[test]
    fn questions_fold_with_their_answers_and_only_the_newest_are_kept() {
        let home = tempfile::tempdir().expect("home");
        std::fs::create_dir_all(agent_dir(home.path(), "a")).expect("dir");
        let mut log = ApprovalLog::new(home.path(), "a");
        let web = Answerer { source: "web".into(), principal_id: Some("p".into()), address: None };
        for n in 0..(KEPT as u64 * 3) {
            let id = format!("q{n}");
            log.asked(asked(&id, n));
            if n % 2 == 0 {
                log.resolved(&id, n + 1, "allow".into(), web.clone());
            }
        }
        let records = list(home.path(), "a", KEPT);
        assert_eq!(records.len(), KEPT);
        let newest = KEPT as u64 * 3 - 1;
        assert_eq!(records[0].request_id, format!("q{newest}"));
        assert_eq!(records[0].outcome, None, "q{newest} is still open");
        assert_eq!(records[1].outcome.as_deref(), Some("allow"));
        assert_eq!(records[1].answered_by.as_ref(), Some(&web));
        assert!(count_lines(&path(home.path(), "a")) <= REWRITE_AFTER + 1);
        // A torn last line is skipped, not fatal.
        let mut file =
            OpenOptions::new().append(true).open(path(home.path(), "a")).expect("append");
        file.write_all(b"{\"asked\":{\"request_id\":").expect("torn");
        assert_eq!(list(home.path(), "a", 5).len(), 5);
    }

    #[test]
    fn a_prompt_is_cleaned_and_bounded() {
        let prompt = bounded_prompt(&format!("\u{1b}[31mred\u{202e} {}", "é".repeat(600)));
        assert!(prompt.len() <= PROMPT_LIMIT);
        assert!(prompt.starts_with("red"));
        assert!(!prompt.contains('\u{1b}') && !prompt.contains('\u{202e}'));
        assert!(prompt.ends_with('…'));
    }
}
