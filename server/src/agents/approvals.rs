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

use super::effect::{self, Effect};
use super::manifest::agent_dir;
use super::sensitive::Places;

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

/// Whether a client of `source` is away from this machine (a browser tab
/// or a notification), where `[step_up]` may ask for a passkey; a local
/// client on the unix socket never is.
pub fn from_away(source: &str) -> bool {
    matches!(source, "web" | "push")
}

/// Which `allow`s from a browser or a notification need a fresh passkey
/// assertion first (`[step_up]` in `config.toml`; docs/SECURITY.md), judged
/// by what the call does ([`Effect`]), whatever it is named.
#[derive(Debug, Clone)]
pub struct StepUp {
    /// Tools whose every allow needs it; `bash` stands for every call that
    /// runs a command, an ACP agent's `execute` calls included.
    pub tools: Vec<String>,
    /// Writes outside the agent's working directory need it.
    pub writes_outside_cwd: bool,
    /// Where a write changes what runs next: such a write always needs it.
    pub places: Places,
}

impl StepUp {
    /// Whether allowing `request` of an agent of `runtime` working in
    /// `cwd` needs it: a command (while `bash` is guarded), a write outside
    /// the cwd, a write that changes what runs (`.git/`, `$SHARD_HOME`,
    /// shell start-up files, what an agent runtime reads as its settings),
    /// a write that names no file, and any call whose effect is not known.
    pub fn requires(
        &self,
        request: &shard_protocol::agent::PermissionRequest,
        cwd: &std::path::Path,
        runtime: &str,
    ) -> bool {
        if self.tools.contains(&request.tool_name) {
            return true;
        }
        match Effect::of(request, runtime) {
            Effect::Runs => self.tools.iter().any(|tool| tool == "bash"),
            // A write that names no path: nothing shows where it lands.
            Effect::Writes(paths) if paths.is_empty() => true,
            Effect::Writes(paths) => paths.iter().any(|path| {
                let full = cwd.join(path);
                // Where it is named, and where it would land.
                let changes_what_runs = [full.clone(), effect::resolved(&full)]
                    .iter()
                    .any(|path| self.places.write_needs_asking(path).is_some());
                (self.writes_outside_cwd && !effect::inside(cwd, path)) || changes_what_runs
            }),
            Effect::Looks | Effect::Delegates => false,
            Effect::Unknown => true,
        }
    }
}

/// `text` cleaned like every diagnostic and cut to [`PROMPT_LIMIT`] bytes.
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
    fn step_up_covers_commands_writes_that_leave_the_cwd_or_change_what_runs_and_the_unknown() {
        let places = Places::new(Path::new("/srv/shard-home"), Some(Path::new("/home/someone")));
        let rule =
            StepUp { tools: vec!["bash".into()], writes_outside_cwd: true, places: places.clone() };
        let call = |tool: &str, input: serde_json::Value, details| {
            shard_protocol::agent::PermissionRequest {
                request_id: "r".into(),
                tool_name: tool.into(),
                input,
                prompt: String::new(),
                options: vec![],
                details,
                choices: None,
            }
        };
        let shard = |tool: &str, input| call(tool, input, None);
        let cwd = std::path::Path::new("/work/project");
        let builtin = shard_platform::runtimes::BUILTIN;
        assert!(rule.requires(&shard("bash", serde_json::json!({"command": "ls"})), cwd, builtin));
        for (path, guarded) in [
            ("src/main.rs", false),
            ("/work/project/src/main.rs", false),
            ("/etc/passwd", true),
            ("../other/file", true),
            ("src/../../escape", true),
            ("/work/project-other/x", true),
            // Inside the cwd, but what runs next is read from there.
            (".git/config", true),
            ("/work/project/.git/hooks/post-checkout", true),
            ("sub/.envrc", true),
            (".claude/settings.json", true),
        ] {
            let write = shard("write", serde_json::json!({"path": path, "content": ""}));
            assert_eq!(rule.requires(&write, cwd, builtin), guarded, "{path}");
        }
        let read = shard("read", serde_json::json!({"path": "/etc/passwd"}));
        assert!(!rule.requires(&read, cwd, builtin));
        assert!(rule.requires(&shard("write", serde_json::json!({})), cwd, builtin), "no path");
        assert!(rule.requires(&shard("mystery", serde_json::json!({})), cwd, builtin));
        // An ACP agent's call, by the kind and files the bridge shows,
        // whatever its title.
        let acp = |kind: Option<&str>, paths: &[&str]| {
            let paths: Vec<std::path::PathBuf> = paths.iter().map(Into::into).collect();
            call("touch …", serde_json::Value::Null, Some(effect::details(kind, &paths)))
        };
        assert!(rule.requires(&acp(Some("execute"), &[]), cwd, "claude"));
        assert!(rule.requires(&acp(Some("edit"), &["/etc/hosts"]), cwd, "claude"));
        assert!(rule.requires(&acp(Some("edit"), &["/work/project/.git/config"]), cwd, "claude"));
        assert!(!rule.requires(&acp(Some("edit"), &["/work/project/src/a.rs"]), cwd, "claude"));
        assert!(rule.requires(&acp(Some("delete"), &[]), cwd, "claude"), "no path");
        assert!(!rule.requires(&acp(Some("read"), &["/etc/passwd"]), cwd, "claude"));
        assert!(rule.requires(&acp(Some("other"), &[]), cwd, "claude"));
        assert!(rule.requires(&acp(None, &[]), cwd, "claude"));
        // The title is never read: an ACP request named `bash` with no
        // details is not known, and guarded as such.
        assert!(rule.requires(&call("read", serde_json::Value::Null, None), cwd, "claude"));
        let lenient = StepUp { tools: vec![], writes_outside_cwd: false, places };
        let write = shard("write", serde_json::json!({"path": "/etc/x"}));
        assert!(!lenient.requires(&write, cwd, builtin));
        assert!(!lenient.requires(&shard("bash", serde_json::json!({})), cwd, builtin));
        let planted = shard("write", serde_json::json!({"path": "/srv/shard-home/config.toml"}));
        assert!(lenient.requires(&planted, cwd, builtin), "what runs is always guarded");
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
