//! The permission gate: decides, for every tool call, whether it runs now,
//! must ask the user, or is refused (ARCHITECTURE §4.3, CONTRACT.md
//! "Permission defaults").
//!
//! - Read-only tools (`read`, `grep`, `find`, `ls`, `recall`, `ask`) inside the
//!   agent's cwd run without asking; outside it they ask.
//! - Mutating tools (`write`, `edit`, `bash`) ask, unless an `allow_always`
//!   grant matches this exact call; in mode `plan` they are refused outright.
//!
//! A grant is always-exact: it records a fingerprint of the tool name and its
//! arguments (keys sorted), so it allows that call again and nothing else.

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use shard_protocol::agent::{
    ChoiceIntent, Decision, DetailFormat, PermissionAnswer, PermissionChoice, PermissionDetail,
    PermissionRequest,
};
use shard_protocol::types::JsonObject;

use crate::{modes, tools};

/// What the gate decided before asking anyone.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Ask,
    Refuse(String),
}

pub fn decide(
    name: &str,
    args: &JsonObject,
    mode: &str,
    cwd: &Path,
    granted: impl Fn(&str) -> bool,
) -> Verdict {
    // Delegation runs nothing here: each child's own gate asks for what it
    // does, and the daemon never gives a child more than its parent's tools
    // and current mode. In a read-only mode, only what reads or stops jobs
    // runs without asking; starting or steering work asks.
    if tools::subagent::is_subagent_tool(name) {
        let narrows = tools::subagent::reads_only(name) || name == "subagent_stop";
        return if narrows || modes::allows_mutation(mode) { Verdict::Allow } else { Verdict::Ask };
    }
    if tools::is_read_only(name) {
        return match tools::target_path(name, args) {
            Some(path) if !tools::is_inside(cwd, &tools::resolve(cwd, &path)) => Verdict::Ask,
            _ => Verdict::Allow,
        };
    }
    if !modes::allows_mutation(mode) {
        return Verdict::Refuse(format!(
            "`{name}` is not allowed in {mode} mode, which allows read-only tools only"
        ));
    }
    if granted(&fingerprint(name, args)) { Verdict::Allow } else { Verdict::Ask }
}

/// A stable fingerprint of one exact call.
pub fn fingerprint(name: &str, args: &JsonObject) -> String {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([0]);
    hasher.update(canonical(&Value::Object(args.clone())).as_bytes());
    hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

/// JSON with object keys sorted at every level, whatever map order is in use.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|key| format!("{}:{}", Value::String(key.clone()), canonical(&map[key])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(","))
        }
        other => other.to_string(),
    }
}

/// What the user's answer means for the call.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Allow,
    AllowAlways,
    Deny,
}

pub fn outcome(answer: &PermissionAnswer) -> Outcome {
    match answer {
        PermissionAnswer::Decision(Decision::Allow) => Outcome::Allow,
        PermissionAnswer::Decision(Decision::AllowAlways) => Outcome::AllowAlways,
        PermissionAnswer::Decision(Decision::Deny) => Outcome::Deny,
        PermissionAnswer::Choice(id) => match id.as_str() {
            CHOICE_ALLOW => Outcome::Allow,
            CHOICE_ALWAYS => Outcome::AllowAlways,
            _ => Outcome::Deny,
        },
    }
}

const CHOICE_ALLOW: &str = "allow-once";
const CHOICE_ALWAYS: &str = "allow-always";
const CHOICE_DENY: &str = "deny";

/// The question for one call, with server-authored details and choices.
pub fn request(request_id: String, name: &str, args: &JsonObject, cwd: &Path) -> PermissionRequest {
    let get = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (prompt, mut details) = match name {
        "bash" => (
            format!("Run `{}`?", crate::util::truncate_chars(&get("command"), 200)),
            vec![detail("command", get("command"), DetailFormat::Command)],
        ),
        "write" => {
            let (prompt, mut details) = file_change("Write", &get("path"), cwd);
            details.push(detail("content", whole(get("content")), DetailFormat::Code));
            (prompt, details)
        }
        "edit" => {
            let (prompt, mut details) = file_change("Edit", &get("path"), cwd);
            details.push(detail("replace", whole(get("old_string")), DetailFormat::Code));
            details.push(detail("with", whole(get("new_string")), DetailFormat::Code));
            (prompt, details)
        }
        other => {
            let path = tools::target_path(other, args).unwrap_or_default();
            (
                format!("Let `{other}` read {path}, outside the working directory?"),
                vec![detail("path", path, DetailFormat::Path)],
            )
        }
    };
    details.push(detail("working directory", cwd.display().to_string(), DetailFormat::Path));
    let choice = |id: &str, label: &str, description: Option<&str>, key: Option<&str>, intent| {
        PermissionChoice {
            id: id.to_owned(),
            label: label.to_owned(),
            description: description.map(str::to_owned),
            accelerator: key.map(str::to_owned),
            intent,
        }
    };
    PermissionRequest {
        request_id,
        tool_name: name.to_owned(),
        input: json!(args),
        prompt,
        options: vec![Decision::Allow, Decision::AllowAlways, Decision::Deny],
        details: Some(details),
        choices: Some(vec![
            choice(CHOICE_ALLOW, "Allow once", None, Some("y"), ChoiceIntent::Allow),
            choice(
                CHOICE_ALWAYS,
                "Always allow this exact call",
                Some("Remembered for this session; only identical calls"),
                // Never a single keystroke: a grant outlives this question.
                None,
                ChoiceIntent::Persist,
            ),
            choice(CHOICE_DENY, "Deny", None, Some("n"), ChoiceIntent::Deny),
        ]),
    }
}

/// The most of a file's content an approval repeats in its details (the
/// call's `input` carries it all anyway): far more than an agent writes at
/// once, and bounded so that a question always fits a client's queue.
const MAX_DETAIL_BYTES: usize = 1024 * 1024;

/// `text` whole, up to [`MAX_DETAIL_BYTES`]; a longer one says so.
fn whole(text: String) -> String {
    if text.len() <= MAX_DETAIL_BYTES {
        return text;
    }
    let mut end = MAX_DETAIL_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes, in the call's input)", &text[..end], text.len() - end)
}

/// The question and details of a change to the file at `path`: what will
/// really be written (symlinks and `..` resolved), and a warning when that is
/// outside the working directory or not where the path seems to point.
fn file_change(verb: &str, path: &str, cwd: &Path) -> (String, Vec<PermissionDetail>) {
    let target = tools::target(cwd, path);
    let real = target.real.display().to_string();
    let mut warnings = Vec::new();
    if !target.inside {
        warnings.push("outside the working directory");
    }
    if target.through_link {
        warnings.push("through a symbolic link");
    }
    let prompt = match warnings.is_empty() {
        true => format!("{verb} {real}?"),
        false => format!("{verb} {real} ({})?", warnings.join(", ")),
    };
    let mut details = Vec::new();
    if !warnings.is_empty() {
        let warning = format!("{}: the path given is {path}", warnings.join(" and "));
        details.push(detail("warning", warning, DetailFormat::Text));
    }
    details.push(detail("file", real, DetailFormat::Path));
    (prompt, details)
}

fn detail(label: &str, value: String, format: DetailFormat) -> PermissionDetail {
    PermissionDetail { label: Some(label.to_owned()), value, format: Some(format) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn fingerprints_ignore_key_order_but_not_values() {
        let a = args(json!({"command": "ls", "timeout": 5}));
        let b = args(json!({"timeout": 5, "command": "ls"}));
        let c = args(json!({"command": "ls -a", "timeout": 5}));
        assert_eq!(fingerprint("bash", &a), fingerprint("bash", &b));
        assert_ne!(fingerprint("bash", &a), fingerprint("bash", &c));
        assert_ne!(fingerprint("bash", &a), fingerprint("write", &a));
    }

    #[test]
    fn the_gate_follows_the_defaults() {
        let cwd = std::env::temp_dir().canonicalize().expect("tmp");
        let never = |_: &str| false;
        assert_eq!(
            decide("read", &args(json!({"path": "x"})), "build", &cwd, never),
            Verdict::Allow
        );
        assert_eq!(
            decide("read", &args(json!({"path": "/etc/hostname"})), "build", &cwd, never),
            Verdict::Ask
        );
        assert_eq!(
            decide("bash", &args(json!({"command": "ls"})), "build", &cwd, never),
            Verdict::Ask
        );
        assert!(matches!(
            decide("bash", &args(json!({"command": "ls"})), "plan", &cwd, never),
            Verdict::Refuse(_)
        ));
        assert_eq!(
            decide("bash", &args(json!({"command": "ls"})), "build", &cwd, |_| true),
            Verdict::Allow
        );
    }
}
