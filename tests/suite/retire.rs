//! `workspace.retire` never loses work (docs/WORKSPACES.md, "What retire
//! proves"): each way a retire once deleted a commit or an uncommitted file
//! without the explicit confirmation, tried against real git repositories;
//! and `workspace.status` reads git's diff through a byte cap.

use std::path::Path;

use serde_json::{Value, json};

use super::client::Client;
use super::support::Daemon;
use super::workspaces::{canonical, create, git, repository, retire, stop_agents};

/// A workspace on `branch` whose agents are stopped; its id and worktree.
async fn idle_workspace(client: &mut Client, repo: &Path, branch: &str) -> (String, String) {
    let made = create(client, json!({"cwd": canonical(repo), "branch": branch})).await;
    assert_eq!(made["success"], true, "{made}");
    stop_agents(client, &made["data"]["workspace"]).await;
    let workspace = &made["data"]["workspace"];
    (
        workspace["workspace_id"].as_str().unwrap().to_owned(),
        workspace["cwd"].as_str().unwrap().to_owned(),
    )
}

/// Commits a new file in `dir`; the new commit.
fn commit_file(dir: &Path, name: &str) -> String {
    std::fs::write(dir.join(name), format!("{name}\n")).unwrap();
    git(dir, &["add", name]);
    git(dir, &["commit", "--quiet", "-m", name]);
    git(dir, &["rev-parse", "HEAD"])
}

fn ref_commit(repo: &Path, reference: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--verify", "--quiet", reference])
        .output()
        .unwrap();
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn kind(answer: &Value) -> &str {
    answer["error"]["data"]["kind"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_branch_whose_short_name_means_another_ref_is_never_taken_for_merged() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let mut client = Client::unix(&daemon.socket()).await;
    let main_tip = git(repo.path(), &["rev-parse", "main"]);

    // `heads/main` is a valid branch name, and as a short name it means `main`.
    let (id, worktree) = idle_workspace(&mut client, repo.path(), "heads/main").await;
    let work = commit_file(Path::new(&worktree), "only-here.txt");
    let refused = retire(&mut client, &id, None).await;
    assert_eq!(kind(&refused), "confirmation_required", "{refused}");
    assert_eq!(ref_commit(repo.path(), "refs/heads/heads/main").as_deref(), Some(work.as_str()));
    assert!(Path::new(&worktree).exists());
    // Confirmed, exactly that branch goes; `main` is untouched.
    let retired = retire(&mut client, &id, Some("delete_confirmed")).await;
    assert_eq!(retired["success"], true, "{retired}");
    assert_eq!(ref_commit(repo.path(), "refs/heads/heads/main"), None);
    assert_eq!(ref_commit(repo.path(), "refs/heads/main").as_deref(), Some(main_tip.as_str()));

    // A tag named like the branch (at a merged commit) does not hide it.
    let (id, worktree) = idle_workspace(&mut client, repo.path(), "feature").await;
    git(repo.path(), &["tag", "feature", "main"]);
    let work = commit_file(Path::new(&worktree), "feature.txt");
    let refused = retire(&mut client, &id, None).await;
    assert_eq!(kind(&refused), "confirmation_required", "{refused}");
    assert_eq!(ref_commit(repo.path(), "refs/heads/feature").as_deref(), Some(work.as_str()));
    // Merged for real, it is deleted without asking, and the tag stays.
    git(repo.path(), &["merge", "--quiet", "--ff-only", "refs/heads/feature"]);
    let retired = retire(&mut client, &id, None).await;
    assert_eq!(retired["success"], true, "{retired}");
    assert_eq!(ref_commit(repo.path(), "refs/heads/feature"), None);
    assert_eq!(ref_commit(repo.path(), "refs/tags/feature").as_deref(), Some(main_tip.as_str()));
}

#[tokio::test]
async fn a_worktree_off_its_branch_is_never_removed() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = idle_workspace(&mut client, repo.path(), "wander").await;
    let worktree = Path::new(&worktree);
    git(worktree, &["switch", "--quiet", "--detach"]);
    let lonely = commit_file(worktree, "detached.txt");
    for disposition in [None, Some("keep"), Some("delete_confirmed")] {
        let refused = retire(&mut client, &id, disposition).await;
        assert_eq!(kind(&refused), "unsafe", "{disposition:?}: {refused}");
        assert_eq!(refused["error"]["data"]["problem"], "head_moved", "{refused}");
        assert!(worktree.join("detached.txt").exists(), "{disposition:?}");
        assert_eq!(git(worktree, &["rev-parse", "HEAD"]), lonely);
        assert!(ref_commit(repo.path(), "refs/heads/wander").is_some(), "{disposition:?}");
    }
    // Back on its branch (the commit kept there), it retires.
    git(worktree, &["switch", "--quiet", "-C", "wander"]);
    let retired = retire(&mut client, &id, Some("keep")).await;
    assert_eq!(retired["success"], true, "{retired}");
    assert_eq!(ref_commit(repo.path(), "refs/heads/wander").as_deref(), Some(lonely.as_str()));
}

#[tokio::test]
async fn a_worktree_git_cannot_read_is_never_deleted() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = idle_workspace(&mut client, repo.path(), "broken").await;
    let worktree = Path::new(&worktree);
    std::fs::write(worktree.join("unsaved.txt"), "an afternoon's work\n").unwrap();
    std::fs::remove_file(worktree.join(".git")).unwrap();
    for disposition in [None, Some("keep"), Some("delete_confirmed")] {
        let refused = retire(&mut client, &id, disposition).await;
        assert_eq!(kind(&refused), "unsafe", "{disposition:?}: {refused}");
        assert_eq!(refused["error"]["data"]["problem"], "unreadable", "{refused}");
        assert_eq!(
            std::fs::read_to_string(worktree.join("unsaved.txt")).unwrap(),
            "an afternoon's work\n"
        );
    }
}

#[tokio::test]
async fn a_subagent_working_in_the_worktree_blocks_retirement() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let mut client = Client::unix(&daemon.socket()).await;
    let made = create(&mut client, json!({"cwd": canonical(repo.path()), "branch": "team"})).await;
    let id = made["data"]["workspace"]["workspace_id"].as_str().unwrap().to_owned();
    let worktree = made["data"]["workspace"]["cwd"].as_str().unwrap().to_owned();
    let parent = made["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&parent, "interactive").await;
    let job = client
        .call(
            "c",
            json!({"type": "subagent.create", "parent_agent_id": parent,
                   "name": "helper", "task": "stream: 1500"}),
        )
        .await;
    assert_eq!(job["success"], true, "{job}");
    let run_id = job["data"]["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let active = |m: &Value| {
        m["type"] == "subagent_run_changed" && m["run_id"] == run_id && m["state"] == "active"
    };
    if !client.seen.iter().any(active) {
        client.until(active).await;
    }
    // The workspace's own agent stops; its child works on in the worktree.
    client.call("d", json!({"type": "agent.detach", "agent_id": parent})).await;
    stop_agents(&mut client, &made["data"]["workspace"]).await;
    let refused = retire(&mut client, &id, Some("keep")).await;
    assert!(matches!(kind(&refused), "busy" | "live"), "{refused}");
    assert!(Path::new(&worktree).join("README").exists(), "the child's files are kept");
    let status = client.call("s", json!({"type": "workspace.status", "workspace_id": id})).await;
    assert_eq!(status["data"]["workspace"]["busy"], true, "{status}");
}

/// The daemon's peak resident memory in KiB.
fn peak_kib(daemon: &Daemon) -> u64 {
    super::support::memory_kib(daemon, "VmHWM")
}

#[tokio::test]
async fn a_huge_diff_is_read_through_a_cap() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = idle_workspace(&mut client, repo.path(), "big").await;
    let worktree = Path::new(&worktree);
    // A committed text file of 24 MiB and an untracked one of 256 MiB.
    let line = "a line of text that goes on for a while, repeated many times\n";
    let committed = line.repeat(24 * 1024 * 1024 / line.len());
    std::fs::write(worktree.join("committed.txt"), &committed).unwrap();
    git(worktree, &["add", "committed.txt"]);
    git(worktree, &["commit", "--quiet", "-m", "big"]);
    drop(committed);
    {
        use std::io::Write;
        let file = std::fs::File::create(worktree.join("untracked.txt")).unwrap();
        let mut file = std::io::BufWriter::new(file);
        let block = line.repeat(1024 * 1024 / line.len());
        for _ in 0..256 {
            file.write_all(block.as_bytes()).unwrap();
        }
        file.flush().unwrap();
    }
    std::fs::write(worktree.join("small.bin"), [0u8, 1, 2, 0, 255]).unwrap();
    let before = peak_kib(&daemon);
    let status = client
        .call("s", json!({"type": "workspace.status", "workspace_id": id, "include_diff": true}))
        .await;
    let grew = peak_kib(&daemon).saturating_sub(before);
    assert_eq!(status["success"], true, "{}", &status.to_string()[..500]);
    assert!(grew < 64 * 1024, "the daemon's peak memory grew by {grew} KiB");
    let diff = &status["data"]["workspace"]["diff"];
    assert_eq!(diff["truncated"], true);
    let files = diff["files"].as_array().unwrap();
    let file = |path: &str| files.iter().find(|file| file["path"] == path).cloned();
    let untracked = file("untracked.txt").expect("the huge new file is listed");
    assert!(untracked["omitted"].as_str().unwrap().contains("too large"), "{untracked}");
    assert_eq!(untracked["hunks"], json!([]));
    let binary = file("small.bin").expect("the binary file is listed");
    assert_eq!(binary["omitted"], "binary file", "{binary}");
}
