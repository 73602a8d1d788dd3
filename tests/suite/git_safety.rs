//! Nothing an agent can write is run by the daemon's git (docs/SECURITY.md,
//! "What the daemon's git runs"). An agent's tools can write its worktree,
//! and with an approved write the repository's `.git`: a planted git
//! directory, a `core.fsmonitor`, a filter, merge or diff driver, a hook, a
//! remote's `uploadpack`/`receivepack`, a `pushurl` or an `insteadOf`.
//! Each would run (or redirect a push) as the daemon, whose children count
//! as local clients. These plant every one of them for real, drive the
//! workspace commands the dashboard sends, and check that no planted
//! program ever ran and no push went anywhere but the URL its preview
//! named.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;
use super::workspace_actions::{act, commit_in, own_git, preview, workspace};
use super::workspaces::{canonical, git, repository};

/// An executable script at `dir/name` that appends `name` to `marks` and
/// then runs `then` (a shell line; its arguments are the script's).
fn planted(dir: &Path, name: &str, marks: &Path, then: &str) -> PathBuf {
    let path = dir.join(name);
    let script = format!("#!/bin/sh\necho {name} >> '{}'\n{then}\n", marks.display());
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// What ran: the names the planted scripts wrote, in order.
fn ran(marks: &Path) -> String {
    std::fs::read_to_string(marks).unwrap_or_default()
}

/// The test's own git in `dir`, with every driver this suite plants off.
fn plain_git(dir: &Path, args: &[&str]) -> String {
    let off = [
        "-c",
        "core.fsmonitor=false",
        "-c",
        "filter.planted.clean=",
        "-c",
        "filter.planted.smudge=",
        "-c",
        "filter.planted.process=",
        "-c",
        "merge.planted.driver=",
        "-c",
        "diff.planted.textconv=",
        "-c",
        "diff.planted.command=",
    ];
    own_git(dir, &[&off[..], args].concat())
}

async fn status(client: &mut Client, id: &str) -> serde_json::Value {
    let body = json!({"type": "workspace.status", "workspace_id": id, "include_diff": true});
    let answer = client.call("st", body).await;
    assert_eq!(answer["success"], true, "{answer}");
    answer["data"]["workspace"].clone()
}

#[tokio::test]
async fn a_worktree_pointed_at_a_git_directory_of_its_own_runs_nothing() {
    let daemon = Daemon::start(&[]).await;
    let scripts = TempDir::new().unwrap();
    let marks = scripts.path().join("ran");
    let repo = repository();
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = workspace(&mut client, repo.path(), "shard/relinked").await;
    let worktree = Path::new(&worktree);
    let real_link = std::fs::read_to_string(worktree.join(".git")).unwrap();

    // What an agent's approved writes inside its own worktree can make: a
    // repository of its own with a file-system monitor, and the worktree's
    // `.git` file pointing at it.
    let fsmonitor = planted(scripts.path(), "fsmonitor", &marks, "exit 1");
    let own = worktree.join("planted");
    git(worktree, &["init", "--quiet", "planted"]);
    std::fs::write(own.join("file"), "x\n").unwrap();
    git(&own, &["add", "file"]);
    git(&own, &["commit", "--quiet", "-m", "planted"]);
    git(&own, &["config", "core.fsmonitor", &fsmonitor.display().to_string()]);
    git(&own, &["config", "core.worktree", &canonical(worktree)]);
    std::fs::write(worktree.join(".git"), format!("gitdir: {}\n", own.join(".git").display()))
        .unwrap();
    std::fs::write(worktree.join("work.txt"), "work\n").unwrap();

    // The dashboard asks for a status (with its diff) on its own.
    let seen = status(&mut client, &id).await;
    assert_eq!(ran(&marks), "", "a planted program ran as the daemon");
    assert_eq!(seen["lifecycle"], "conflict", "{seen}");
    let conflict = seen["conflict"].as_str().unwrap_or_default();
    assert!(conflict.contains("`.git` no longer points"), "{seen}");
    for action in ["commit", "merge", "push"] {
        let refused = act(&mut client, action, &id, json!({"dry_run": true})).await;
        assert_eq!(refused["error"]["data"]["kind"], "unsafe", "{action}: {refused}");
        assert_eq!(refused["error"]["data"]["problem"], "relinked", "{action}: {refused}");
    }
    let attach = json!({"type": "workspace.attach", "workspace_id": id});
    let refused = client.call("at", attach).await;
    assert_eq!(refused["error"]["data"]["problem"], "relinked", "{refused}");
    assert_eq!(ran(&marks), "", "a planted program ran as the daemon");

    // Put back as git made it, the workspace is whole again.
    std::fs::write(worktree.join(".git"), real_link).unwrap();
    let seen = status(&mut client, &id).await;
    assert_eq!(seen["lifecycle"], "active", "{seen}");
    assert_eq!(seen["dirty_files"], 2, "planted/ and work.txt: {seen}");
    assert_eq!(ran(&marks), "");
}

#[tokio::test]
async fn the_repository_config_runs_nothing_for_create_status_commit_or_merge() {
    let daemon = Daemon::start(&[]).await;
    let scripts = TempDir::new().unwrap();
    let marks = scripts.path().join("ran");
    let repo = repository();
    let dir = repo.path();
    git(dir, &["config", "user.name", "Shard Test"]);
    git(dir, &["config", "user.email", "test@example.invalid"]);
    // Every file goes through the planted drivers.
    commit_in(dir, ".gitattributes", "* filter=planted merge=planted diff=planted\n");
    // What an approved write of `.git/config`, or of a file it includes,
    // can set; and hooks in `.git/hooks`.
    let included = scripts.path().join("included.config");
    let script = |name: &str, then: &str| planted(scripts.path(), name, &marks, then);
    let clean = script("clean", "cat");
    let smudge = script("smudge", "cat");
    let process = script("process", "exit 1");
    let driver = script("merge-driver", "exit 1");
    let textconv = script("textconv", "cat \"$1\"");
    let fsmonitor = script("fsmonitor", "exit 1");
    std::fs::write(
        &included,
        format!(
            "[filter \"planted\"]\n\tclean = {}\n\tsmudge = {}\n\tprocess = {}\n",
            clean.display(),
            smudge.display(),
            process.display()
        ),
    )
    .unwrap();
    git(dir, &["config", "include.path", &included.display().to_string()]);
    git(dir, &["config", "merge.planted.driver", &format!("{} %O %A %B", driver.display())]);
    git(dir, &["config", "diff.planted.textconv", &textconv.display().to_string()]);
    git(dir, &["config", "diff.planted.command", &textconv.display().to_string()]);
    git(dir, &["config", "core.fsmonitor", &fsmonitor.display().to_string()]);
    let hooks = dir.join(".git/hooks");
    for hook in ["post-checkout", "pre-commit", "post-commit", "reference-transaction"] {
        planted(&hooks, hook, &marks, "exit 0");
    }

    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = workspace(&mut client, dir, "shard/drivers").await;
    let worktree = Path::new(&worktree);
    assert_eq!(ran(&marks), "", "making the worktree ran a planted program");

    std::fs::write(worktree.join("README"), "hello from the workspace\n").unwrap();
    std::fs::write(worktree.join("new.txt"), "new\n").unwrap();
    let seen = status(&mut client, &id).await;
    assert_eq!(seen["dirty_files"], 2, "{seen}");
    assert!(seen["diff"]["files"].as_array().is_some_and(|files| files.len() == 2), "{seen}");
    let shown = preview(&mut client, "commit", &id).await;
    let done = act(
        &mut client,
        "commit",
        &id,
        json!({"fingerprint": shown["fingerprint"], "message": "work"}),
    )
    .await;
    assert_eq!(done["success"], true, "{done}");
    assert_eq!(ran(&marks), "", "status or commit ran a planted program");

    // Both sides changed README: git asks the merge driver.
    std::fs::write(dir.join("README"), "hello from main\n").unwrap();
    plain_git(dir, &["commit", "--quiet", "-am", "main's"]);
    let merge = act(&mut client, "merge", &id, json!({"dry_run": true})).await;
    assert_eq!(merge["data"]["merge"], "conflict", "{merge}");
    assert_eq!(ran(&marks), "", "the merge ran a planted driver");
}

#[tokio::test]
async fn a_push_goes_where_its_preview_says_and_runs_nothing_of_the_repository() {
    let daemon = Daemon::start(&[]).await;
    let scripts = TempDir::new().unwrap();
    let marks = scripts.path().join("ran");
    let repo = repository();
    let dir = repo.path();
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = workspace(&mut client, dir, "shard/pushed").await;
    plain_git(Path::new(&worktree), &["config", "user.name", "Shard Test"]);
    plain_git(Path::new(&worktree), &["config", "user.email", "test@example.invalid"]);
    commit_in(Path::new(&worktree), "work.txt", "work\n");
    std::fs::write(daemon.home.join("config.toml"), "[workspaces]\npush_remote = \"origin\"\n")
        .unwrap();

    let origin = TempDir::new().unwrap();
    let decoy = TempDir::new().unwrap();
    for bare in [&origin, &decoy] {
        git(bare.path(), &["init", "--quiet", "--bare"]);
    }
    planted(&origin.path().join("hooks"), "pre-receive", &marks, "exit 0");
    let origin_url = origin.path().display().to_string();
    let decoy_url = decoy.path().display().to_string();
    git(dir, &["remote", "add", "origin", &origin_url]);
    // Where an approved write of `.git/config` could send the push, and
    // what it could have run for it.
    git(dir, &["config", "remote.origin.pushurl", &decoy_url]);
    git(dir, &["config", &format!("url.{decoy_url}.insteadOf"), &origin_url]);
    git(dir, &["config", &format!("url.{decoy_url}.pushInsteadOf"), &origin_url]);
    let upload = planted(scripts.path(), "uploadpack", &marks, "exec git-upload-pack \"$@\"");
    let receive = planted(scripts.path(), "receivepack", &marks, "exec git-receive-pack \"$@\"");
    git(dir, &["config", "remote.origin.uploadpack", &upload.display().to_string()]);
    git(dir, &["config", "remote.origin.receivepack", &receive.display().to_string()]);
    let ssh = planted(scripts.path(), "ssh", &marks, "exit 1");
    git(dir, &["config", "core.sshCommand", &ssh.display().to_string()]);

    let shown = preview(&mut client, "push", &id).await;
    assert_eq!(ran(&marks), "", "the preview ran a planted program");
    assert_eq!(shown["remote"], "origin", "{shown}");
    assert_eq!(shown["remote_url"], origin_url.as_str(), "the exact URL: {shown}");
    assert!(shown["summary"].as_str().unwrap().contains(&origin_url), "{shown}");

    let done = act(&mut client, "push", &id, json!({"fingerprint": shown["fingerprint"]})).await;
    assert_eq!(done["success"], true, "{done}");
    let tip = git(Path::new(&worktree), &["rev-parse", "HEAD"]);
    assert_eq!(git(origin.path(), &["rev-parse", "refs/heads/shard/pushed"]), tip);
    assert_eq!(git(decoy.path(), &["for-each-ref"]), "", "nothing went to the decoy");
    assert_eq!(ran(&marks), "", "the push ran a planted program");
}

#[tokio::test]
async fn a_remote_url_with_a_token_is_named_with_the_token_masked() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let dir = repo.path();
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, _) = workspace(&mut client, dir, "shard/masked").await;
    std::fs::write(daemon.home.join("config.toml"), "[workspaces]\npush_remote = \"origin\"\n")
        .unwrap();
    // Unreachable (nothing listens on port 9 here), so the preview fails
    // to reach it; its refusal must not carry the token either.
    let url = "https://oauth2:ghp_secretsecretsecret@127.0.0.1:9/owner/repo.git";
    git(dir, &["remote", "add", "origin", url]);
    let refused = act(&mut client, "push", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "push_failed", "{refused}");
    assert!(!refused.to_string().contains("ghp_secret"), "{refused}");
    // A second URL for the remote: which one a push takes is unclear.
    git(dir, &["config", "--add", "remote.origin.url", "https://example.invalid/other.git"]);
    let refused = act(&mut client, "push", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "unclear_remote", "{refused}");
}
