//! The sandbox's start (docs/SANDBOX.md): `agent.create` of Shard's own
//! agent until it is ready, with `[sandbox] mode = "off"` and with the
//! default sandbox, in one daemon whose `config.toml` is switched between
//! samples (it is read at each agent's start). The two alternate, each
//! agent is killed before the next sample, and every agent works in the
//! same project (a git checkout, whose `.git` the sandbox mounts read-only).
//!
//! Then where the difference goes: the running agent's own bubblewrap
//! command line, read from `/proc`, is started by hand with the agent's
//! command (`shard agent --stdio`, to its `hello`) in place of the daemon's,
//! once bare, once in bubblewrap without and with the network namespace,
//! and once with `shard contain` (the system-call filter, the egress
//! forwarder) in between as the daemon starts it. What the daemon itself
//! adds (its policy, the egress proxy's socket) is the rest.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::Args;
use crate::conn::Conn;
use crate::lifecycle::quantile;
use crate::procfs;
use crate::report::ms;
use crate::shard::{Shard, scratch};

/// `config.toml` with the sandbox off: the owner's opt-out.
pub const OFF: &str = "[sandbox]\nmode = \"off\"\n";
/// `config.toml` with the sandbox as it is by default.
pub const DEFAULT: &str = "";

/// Every sample's `agent.create` until ready, and the parts of a start.
pub struct Start {
    pub off: Vec<Duration>,
    pub on: Vec<Duration>,
    pub parts: Parts,
}

/// The agent's command to its `hello`, started by hand each way.
#[derive(Default)]
pub struct Parts {
    pub bare: Vec<Duration>,
    /// In the agent's bubblewrap without its network namespace.
    pub bwrap_shared_net: Vec<Duration>,
    pub bwrap: Vec<Duration>,
    /// In the agent's bubblewrap with `shard contain`: the daemon's way.
    pub contained: Vec<Duration>,
}

pub async fn start(shard: &Shard, bin: &Path, samples: usize) -> Result<Start> {
    let project = project()?;
    let daemon = shard.pid().context("daemon pid")?;
    let mut control = shard.unix().await?;
    let mut start = Start { off: Vec::new(), on: Vec::new(), parts: Parts::default() };
    for sample in 0..samples {
        // Which goes first alternates, so neither always follows a kill.
        let order = if sample % 2 == 0 { [false, true] } else { [true, false] };
        for contained in order {
            shard.configure(if contained { DEFAULT } else { OFF })?;
            let started = Instant::now();
            let agent = create(&mut control, &project).await?;
            let took = started.elapsed();
            if contained {
                start.on.push(took);
                let argv = jail_of(daemon)?;
                start.parts.sample(sample, bin, &argv, &project).await?;
            } else {
                start.off.push(took);
            }
            let kill = json!({"type": "agent.kill", "agent_id": agent, "force": true});
            control.call(kill, "kill").await?;
        }
    }
    Ok(start)
}

/// The sandbox's cost at an agent's start, against no sandbox.
pub async fn run(args: &Args) -> Result<()> {
    let samples = if args.short { 10 } else { 100 };
    let daemon = Shard::start(&args.shard, 64, None).await?;
    let mut start = start(&daemon, &args.shard, samples).await?;
    daemon.stop().await?;
    let figures = |samples: &mut Vec<Duration>| (quantile(samples, 0.5), quantile(samples, 0.95));
    let (off, on) = (figures(&mut start.off), figures(&mut start.on));
    let parts = &mut start.parts;
    let (bare, shared_net, bwrap, contained) = (
        figures(&mut parts.bare),
        figures(&mut parts.bwrap_shared_net),
        figures(&mut parts.bwrap),
        figures(&mut parts.contained),
    );
    let pair =
        |(p50, p95): (Duration, Duration)| format!("{:>7.1} ms / {:>7.1} ms", ms(p50), ms(p95));
    println!();
    println!(
        "Sandbox start: {samples} agents of Shard's own each way, in one daemon whose config.toml is switched between samples, agent.create until ready (p50 / p95)"
    );
    println!("  sandbox off:                           {}", pair(off));
    println!("  sandbox on (the default):              {}", pair(on));
    let added = ms(on.0) - ms(off.0);
    println!("  p50 added by the sandbox: {added:+.1} ms (target: at most +25 ms)");
    println!(
        "  where it goes: the running agent's bubblewrap command line (from /proc) started by hand, with `shard agent --stdio` to its hello"
    );
    println!("    bare, no bubblewrap:                 {}", pair(bare));
    println!("    bubblewrap without --unshare-net:    {}", pair(shared_net));
    println!("    bubblewrap:                          {}", pair(bwrap));
    println!("    bubblewrap, then `shard contain`:    {}", pair(contained));
    let (bare, shared_net, bwrap, contained) =
        (ms(bare.0), ms(shared_net.0), ms(bwrap.0), ms(contained.0));
    println!(
        "  p50: bubblewrap {:+.1} ms (of which the network namespace {:+.1} ms), `contain` {:+.1} ms, the daemon's own part (the rest) {:+.1} ms",
        bwrap - bare,
        bwrap - shared_net,
        contained - bwrap,
        added - (contained - bare),
    );
    Ok(())
}

/// A git checkout with one commit, as a project an agent is started in.
fn project() -> Result<PathBuf> {
    let project = scratch("project")?;
    std::fs::write(project.join("README"), "a project\n")?;
    for args in [&["init", "-q", "-b", "main"][..], &["add", "README"], &["commit", "-qm", "one"]] {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .current_dir(&project)
            .stdout(Stdio::null())
            .status()
            .context("running git")?;
        if !status.success() {
            bail!("git {args:?} failed in the project");
        }
    }
    Ok(project)
}

async fn create(control: &mut Conn, project: &Path) -> Result<String> {
    let create = json!({"type": "agent.create", "cwd": project, "name": "bench"});
    let response = control.call(create, "create").await?;
    Ok(response["data"]["agent_id"].as_str().context("agent_id")?.to_owned())
}

/// The command line the daemon started its one running agent with:
/// bubblewrap, its options, `--`, `shard contain …`, `--`, the agent.
fn jail_of(daemon: u32) -> Result<Vec<OsString>> {
    procfs::children(daemon)
        .into_iter()
        .map(procfs::cmdline)
        .find(|argv| argv.iter().any(|part| part == "contain"))
        .context("no contained agent among the daemon's children")
}

impl Parts {
    /// One start of each kind, from the daemon's command line `jail`.
    async fn sample(
        &mut self,
        sample: usize,
        bin: &Path,
        jail: &[OsString],
        project: &Path,
    ) -> Result<()> {
        let mut ends = jail.iter().enumerate().filter(|(_, part)| *part == "--").map(|(at, _)| at);
        let (Some(options_end), Some(contain_end)) = (ends.next(), ends.next()) else {
            bail!("not a contained agent's command line: {jail:?}");
        };
        let bwrap = &jail[..options_end];
        let shared_net: Vec<OsString> =
            bwrap.iter().filter(|part| *part != "--unshare-net").cloned().collect();
        // `shard contain --egress …` with its closing `--`.
        let contain = &jail[options_end + 1..=contain_end];
        let agent = [bin.as_os_str(), OsStr::new("agent"), OsStr::new("--stdio")];
        let agent: Vec<OsString> = agent.iter().map(|part| part.to_os_string()).collect();
        let dashes = OsString::from("--");
        let mut ways: [(&mut Vec<Duration>, Vec<&OsString>); 4] = [
            (&mut self.bare, agent.iter().collect()),
            (
                &mut self.bwrap_shared_net,
                shared_net.iter().chain([&dashes]).chain(&agent).collect(),
            ),
            (&mut self.bwrap, bwrap.iter().chain([&dashes]).chain(&agent).collect()),
            (
                &mut self.contained,
                bwrap.iter().chain([&dashes]).chain(contain).chain(&agent).collect(),
            ),
        ];
        // Each sample starts with another way, so that none always runs
        // first (or right after the daemon's own start).
        ways.rotate_left(sample % 4);
        for (times, argv) in ways {
            times.push(to_hello(&argv, project).await?);
        }
        Ok(())
    }
}

/// Starts `argv` (an agent's command, perhaps inside others) for the
/// project, with a fresh `$SHARD_HOME` in it (the one place every way
/// can write), until the agent's `hello`.
async fn to_hello(argv: &[&OsString], project: &Path) -> Result<Duration> {
    let home = project.join(format!(".home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home)?;
    let (program, rest) = argv.split_first().context("an empty command")?;
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(rest)
        .args([OsStr::new("--cwd"), project.as_os_str()])
        .env("SHARD_HOME", &home)
        .env("SHARD_LOG", "error")
        .current_dir(project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", program.to_string_lossy()))?;
    let stdout = child.stdout.take().context("stdout")?;
    let line = BufReader::new(stdout).lines().next_line().await?;
    let took = started.elapsed();
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&home);
    if !line.as_deref().is_some_and(|line| line.contains("\"hello\"")) {
        bail!("the agent did not say hello: {line:?} from {argv:?}");
    }
    Ok(took)
}
