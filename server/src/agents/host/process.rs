//! Process generations: each Runtime of a durable agent is one generation
//! of its process (`runtime_epoch` counts them), started through the
//! runtime seam (crate::agents::runtime): the host starts one when work
//! arrives, waits for its `hello` and `sync`, and stops it by closing its
//! input, by SIGTERM, or by a forced kill, escalating on deadlines.
//!
//! [`Supervision`] decides; the host holds the running process and does
//! what it says ([`Control`]).

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::ShutdownMode;
use crate::agents::runtime::stdio::Ended;

/// How long a new process may take to say `hello` and `sync`: a little
/// longer than an ACP agent gets to answer `initialize` and open its
/// session (CONTRACT.md: 30 s), so that its runtime reports why first.
pub const START_TIMEOUT: Duration = Duration::from_secs(35);
/// After SIGTERM, how long a process may take before its tree is killed.
/// The agent itself exits within a few seconds of SIGTERM whatever it was
/// doing; this only catches one that is wedged.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// After its input closed (only ever when it has nothing to do), how long
/// a process may take to exit before it gets SIGTERM: Shard's own agent
/// exits at once, but an ACP agent may not exit when its input ends
/// (claude-agent-acp and codex-acp keep running).
pub const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What the host does to the running process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Control {
    /// Close its input: the agent finishes its work and exits.
    CloseInput,
    /// SIGTERM: the agent aborts its turn, flushes and exits.
    Terminate,
    /// SIGKILL to the process and everything below it.
    Kill,
}

/// A deadline of the process that came due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    /// It did not say `hello` and `sync` in time: killed; what waited for
    /// it fails.
    NotReady,
    /// It did not exit after SIGTERM: killed.
    Unyielding,
    /// It did not exit once its input closed: SIGTERM, then the kill grace.
    Lingering,
    /// Idle past the idle timeout: its input is closed.
    Idle,
}

impl Due {
    /// What is done to the process.
    pub fn control(self) -> Control {
        match self {
            Due::NotReady | Due::Unyielding => Control::Kill,
            Due::Lingering => Control::Terminate,
            Due::Idle => Control::CloseInput,
        }
    }

    /// Says so in the daemon's log.
    pub fn log(self, agent_id: &str) {
        match self {
            Due::NotReady => {
                tracing::warn!(agent = %agent_id, "agent process did not become ready in time")
            }
            Due::Unyielding => {
                tracing::warn!(agent = %agent_id, "agent did not exit after SIGTERM; killing it")
            }
            Due::Lingering => {
                tracing::warn!(agent = %agent_id, "agent did not exit when its input closed; terminating it")
            }
            Due::Idle => tracing::info!(agent = %agent_id, "stopping idle runtime"),
        }
    }
}

/// What a daemon shutdown asks of the process now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Shutting {
    /// There is none: the waiter was answered.
    NoProcess,
    /// Do this (or nothing yet: a drain waits for the turn to end).
    Then(Option<Control>),
}

/// The daemon is shutting down: how (the strongest mode asked so far), and
/// who waits for the process to end.
struct Shutdown {
    mode: ShutdownMode,
    waiters: Vec<oneshot::Sender<()>>,
}

/// The agent's process as the host supervises it: the current generation,
/// how many there were, a shutdown in progress, who waits for the process
/// to end, and when it was last busy.
pub(super) struct Supervision {
    /// The running (or starting, or stopping) generation.
    current: Option<Generation>,
    /// Generations started so far; the current one's `runtime_epoch` is
    /// this minus one.
    generations: u64,
    shutdown: Option<Shutdown>,
    kill_waiters: Vec<oneshot::Sender<()>>,
    /// `agent.terminate` came while the agent was active: stop it once it
    /// is not.
    terminate_when_inactive: bool,
    /// The agent last did or was asked something: idle reaping counts
    /// from here.
    last_active: Instant,
    idle_timeout: Duration,
    /// `session.activate` switched the session: once a process runs it,
    /// every attachment gets the new session's `sync`.
    switched: bool,
}

/// The host's view of its current generation.
pub(super) struct Generation {
    pub epoch: u64,
    pub ready: bool,
    started: Instant,
    /// A stop was asked for (terminate, reap, kill, shutdown): the exit is
    /// expected and the agent stays `stopped`, not `failed`.
    stopping: bool,
    saw_hello: bool,
    /// When a graceful kill turns into a forced one.
    kill_at: Option<Instant>,
    /// When a process whose input was closed is sent SIGTERM.
    terminate_at: Option<Instant>,
    /// Where this generation's lines begin in the agent's log: what it
    /// wrote there says why, if it exits before it is ready.
    pub log_from: u64,
    /// The fleet's limits stopped it, and why.
    because: Option<Because>,
}

impl Generation {
    /// Its input closes at `now`: it is stopping, and SIGTERM follows if it
    /// has not exited after [`CLOSE_GRACE`] (and nothing harder came first).
    fn close(&mut self, now: Instant) {
        self.stopping = true;
        if self.kill_at.is_none() {
            self.terminate_at.get_or_insert(now + CLOSE_GRACE);
        }
    }
}

/// Why the fleet's limits stopped a process (agents::fleet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Because {
    /// To make room: it comes back on its next prompt or attach.
    Hibernated(String),
    /// Its process tree held more than its own ceiling.
    OverCeiling(String),
}

impl Supervision {
    pub fn new(idle_timeout: Duration, now: Instant) -> Self {
        Self {
            current: None,
            generations: 0,
            shutdown: None,
            kill_waiters: Vec::new(),
            terminate_when_inactive: false,
            last_active: now,
            idle_timeout,
            switched: false,
        }
    }

    /// A generation runs (or starts, or stops).
    pub fn running(&self) -> bool {
        self.current.is_some()
    }

    /// Whether `epoch` is the running generation's (lines and exits of
    /// superseded ones are history).
    pub fn is_current(&self, epoch: u64) -> bool {
        self.current.as_ref().is_some_and(|generation| generation.epoch == epoch)
    }

    /// A process that is up and not being stopped.
    pub fn ready(&self) -> bool {
        self.current.as_ref().is_some_and(|generation| generation.ready && !generation.stopping)
    }

    /// The running generation said `hello` and `sync`.
    pub fn up(&self) -> bool {
        self.current.as_ref().is_some_and(|generation| generation.ready)
    }

    /// The running generation is being stopped.
    pub fn stopping(&self) -> bool {
        self.current.as_ref().is_some_and(|generation| generation.stopping)
    }

    /// The current `runtime_epoch`.
    pub fn epoch(&self) -> u64 {
        self.generations.saturating_sub(1)
    }

    /// The daemon is shutting down: nothing new starts.
    pub fn shutting_down(&self) -> bool {
        self.shutdown.is_some()
    }

    /// The epoch of the generation about to start; counted even if it
    /// fails to.
    pub fn next_epoch(&mut self) -> u64 {
        self.generations += 1;
        self.generations - 1
    }

    /// Generation `epoch` started at `now`; its lines begin at `log_from`
    /// in the agent's log.
    pub fn started(&mut self, epoch: u64, now: Instant, log_from: u64) {
        self.current = Some(Generation {
            epoch,
            ready: false,
            started: now,
            stopping: false,
            saw_hello: false,
            kill_at: None,
            terminate_at: None,
            log_from,
            because: None,
        });
    }

    /// Its `hello` came.
    pub fn hello(&mut self) {
        if let Some(generation) = &mut self.current {
            generation.saw_hello = true;
        }
    }

    /// Its `sync` counts only after its `hello`.
    pub fn saw_hello(&self) -> bool {
        self.current.as_ref().is_some_and(|generation| generation.saw_hello)
    }

    /// Its `sync` came: it is ready. Whether every attachment syncs again
    /// (§9.1: a replacement generation, or a switched session).
    pub fn became_ready(&mut self, now: Instant) -> bool {
        if let Some(generation) = &mut self.current {
            generation.ready = true;
        }
        self.last_active = now;
        let switched = std::mem::take(&mut self.switched);
        self.generations > 1 || switched
    }

    /// The agent runs another session from its next generation on.
    pub fn switch_session(&mut self) {
        self.switched = true;
    }

    /// A switched session waits to be shown to those attached.
    pub fn switch_pending(&self) -> bool {
        self.switched
    }

    /// The agent did or was asked something at `now`.
    pub fn touch(&mut self, now: Instant) {
        self.last_active = now;
    }

    /// Graceful stop of an agent with nothing to do: close its input; it
    /// exits, or gets SIGTERM after [`CLOSE_GRACE`].
    pub fn stop(&mut self, now: Instant) -> Option<Control> {
        let generation = self.current.as_mut()?;
        generation.close(now);
        Some(Control::CloseInput)
    }

    /// The fleet's limits stop the process: gently to hibernate it (only
    /// an `idle` one: ready, with nothing in hand), at once when it is over
    /// its own ceiling.
    pub fn stop_for(&mut self, because: Because, idle: bool, now: Instant) -> Option<Control> {
        let generation = self.current.as_mut()?;
        let control = match because {
            Because::Hibernated(_) if !idle || generation.stopping => return None,
            Because::Hibernated(_) => self.stop(now),
            Because::OverCeiling(_) => self.kill(true, now),
        };
        if let Some(generation) = &mut self.current {
            generation.because.get_or_insert(because);
        }
        control
    }

    /// SIGTERM with a grace period, or the whole tree at once.
    pub fn kill(&mut self, force: bool, now: Instant) -> Option<Control> {
        let generation = self.current.as_mut()?;
        generation.stopping = true;
        generation.terminate_at = None;
        if force {
            return Some(Control::Kill);
        }
        generation.kill_at.get_or_insert(now + KILL_GRACE);
        Some(Control::Terminate)
    }

    /// `agent.kill`: `reply` once the process has exited. `false`: there
    /// is none, and `reply` was answered.
    pub fn await_exit(&mut self, reply: oneshot::Sender<()>) -> bool {
        if self.current.is_none() {
            let _ = reply.send(());
            return false;
        }
        self.kill_waiters.push(reply);
        true
    }

    /// `agent.terminate`: stop now, or once the agent is no longer
    /// `active`. Whether it was deferred, and what to do now.
    pub fn terminate(&mut self, active: bool, now: Instant) -> (bool, Option<Control>) {
        let deferred = active && self.current.is_some();
        if deferred {
            self.terminate_when_inactive = true;
            return (true, None);
        }
        (false, self.stop(now))
    }

    /// The agent went inactive: a deferred terminate or a draining
    /// shutdown stops it now.
    pub fn inactive(&mut self, now: Instant) -> Option<Control> {
        let draining =
            self.shutdown.as_ref().is_some_and(|shutdown| shutdown.mode != ShutdownMode::Kill);
        if self.terminate_when_inactive || draining { self.stop(now) } else { None }
    }

    /// A daemon shutdown in `mode` (a later, stronger mode takes over);
    /// `reply` once the process has exited. `active`: the agent is in a
    /// turn, which a drain lets finish.
    pub fn shut_down(
        &mut self,
        mode: ShutdownMode,
        reply: oneshot::Sender<()>,
        active: bool,
        now: Instant,
    ) -> Shutting {
        let shutdown = self.shutdown.get_or_insert(Shutdown { mode, waiters: Vec::new() });
        shutdown.mode = shutdown.mode.max(mode);
        if self.current.is_none() {
            let _ = reply.send(());
            return Shutting::NoProcess;
        }
        shutdown.waiters.push(reply);
        Shutting::Then(match mode {
            ShutdownMode::Kill => self.kill(true, now),
            // The agent's own way out: abort, flush, exit (CONTRACT.md
            // "Process lifetime"), bounded by the kill grace.
            ShutdownMode::Terminate => self.kill(false, now),
            ShutdownMode::Drain if !active => self.stop(now),
            ShutdownMode::Drain => None,
        })
    }

    /// The running generation exited: whether its end was asked for,
    /// whether it was ever ready, and where its lines begin in the log;
    /// and why, if the fleet's limits stopped it.
    pub fn exited(&mut self) -> Option<(Ended, Option<Because>)> {
        let generation = self.current.take()?;
        let expected = generation.stopping || self.shutdown.is_some();
        let ended = Ended { expected, ready: generation.ready, log_from: generation.log_from };
        self.terminate_when_inactive = false;
        if !generation.ready {
            // A switched session that cannot start is not started again
            // and again for its watchers: the next work or attach retries.
            self.switched = false;
        }
        Some((ended, generation.because))
    }

    /// Tells whoever waited for the process to end.
    pub fn answer_kill_waiters(&mut self) {
        for waiter in self.kill_waiters.drain(..) {
            let _ = waiter.send(());
        }
    }

    /// After an exit during a daemon shutdown: its waiters are answered.
    /// `false`: no shutdown is going on.
    pub fn finish_shutdown(&mut self) -> bool {
        let Some(shutdown) = self.shutdown.as_mut() else { return false };
        for waiter in shutdown.waiters.drain(..) {
            let _ = waiter.send(());
        }
        true
    }

    /// Nothing about the process is going on or awaited.
    pub fn at_rest(&self) -> bool {
        self.current.is_none()
            && self.kill_waiters.is_empty()
            && self.shutdown.is_none()
            && !self.terminate_when_inactive
    }

    /// The next deadline: the start timeout, the kill grace, or (when the
    /// host says the agent is `reapable`) the idle timeout.
    pub fn deadline(&self, reapable: bool) -> Option<Instant> {
        let generation = self.current.as_ref()?;
        let due = if !generation.ready {
            Some(generation.started + START_TIMEOUT)
        } else if reapable {
            Some(self.last_active + self.idle_timeout)
        } else {
            None
        };
        due.into_iter().chain(generation.kill_at).chain(generation.terminate_at).min()
    }

    /// What came due at `now`, already acted on here; the host kills or
    /// closes input as [`Due`] says.
    pub fn timers(&mut self, now: Instant, reapable: bool) -> Option<Due> {
        let generation = self.current.as_mut()?;
        if !generation.ready && now >= generation.started + START_TIMEOUT {
            generation.stopping = true;
            return Some(Due::NotReady);
        }
        if generation.kill_at.is_some_and(|at| now >= at) {
            generation.kill_at = None;
            return Some(Due::Unyielding);
        }
        if generation.terminate_at.is_some_and(|at| now >= at) {
            generation.terminate_at = None;
            generation.kill_at.get_or_insert(now + KILL_GRACE);
            return Some(Due::Lingering);
        }
        if reapable && now >= self.last_active + self.idle_timeout {
            generation.close(now);
            return Some(Due::Idle);
        }
        None
    }

    /// Gives back the room the waiters grew to (a host going dormant).
    pub fn shed(&mut self) {
        self.kill_waiters = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(600);

    #[test]
    fn a_start_that_never_becomes_ready_times_out_once() {
        let start = Instant::now();
        let mut process = Supervision::new(IDLE, start);
        let epoch = process.next_epoch();
        process.started(epoch, start, 0);
        assert_eq!(process.deadline(true), Some(start + START_TIMEOUT));
        assert_eq!(process.timers(start + START_TIMEOUT - Duration::from_millis(1), true), None);
        assert_eq!(process.timers(start + START_TIMEOUT, true), Some(Due::NotReady));
        let (exit, _) = process.exited().expect("it ran");
        assert!(exit.expected, "a timed-out start is stopped, not failed");
        assert_eq!(process.next_epoch(), 1, "the next generation is the next epoch");
    }

    #[test]
    fn a_graceful_kill_escalates_after_the_grace_and_an_idle_process_is_reaped() {
        let start = Instant::now();
        let mut process = Supervision::new(IDLE, start);
        let epoch = process.next_epoch();
        process.started(epoch, start, 0);
        process.hello();
        process.became_ready(start);
        assert!(process.ready());
        assert_eq!(process.deadline(false), None, "busy: nothing is due");
        assert_eq!(process.deadline(true), Some(start + IDLE));
        let later = start + Duration::from_secs(60);
        process.touch(later);
        assert_eq!(process.timers(start + IDLE, true), None, "touched since");
        assert_eq!(process.timers(later + IDLE, true), Some(Due::Idle));
        assert!(process.stopping() && !process.ready());

        let mut process = Supervision::new(IDLE, start);
        process.started(process.generations, start, 0);
        process.became_ready(start);
        assert_eq!(process.kill(false, start), Some(Control::Terminate));
        assert_eq!(process.kill(false, start + KILL_GRACE), Some(Control::Terminate));
        assert_eq!(process.deadline(false), Some(start + KILL_GRACE), "the first grace holds");
        assert_eq!(process.timers(start + KILL_GRACE, false), Some(Due::Unyielding));
        assert_eq!(process.timers(start + KILL_GRACE * 2, false), None, "killed once");
    }

    #[test]
    fn a_process_that_does_not_exit_when_its_input_closes_is_terminated_then_killed() {
        let start = Instant::now();
        let mut process = Supervision::new(IDLE, start);
        let epoch = process.next_epoch();
        process.started(epoch, start, 0);
        process.hello();
        process.became_ready(start);
        let hibernated = Because::Hibernated("to make room".into());
        assert_eq!(process.stop_for(hibernated, true, start), Some(Control::CloseInput));
        assert_eq!(process.deadline(false), Some(start + CLOSE_GRACE));
        let before = start + CLOSE_GRACE - Duration::from_millis(1);
        assert_eq!(process.timers(before, false), None, "it may still exit by itself");
        assert_eq!(process.timers(start + CLOSE_GRACE, false), Some(Due::Lingering));
        assert_eq!(Due::Lingering.control(), Control::Terminate);
        let killed_at = start + CLOSE_GRACE + KILL_GRACE;
        assert_eq!(process.deadline(false), Some(killed_at), "then the kill grace");
        assert_eq!(process.timers(killed_at, false), Some(Due::Unyielding));
        assert_eq!(process.timers(killed_at + CLOSE_GRACE, false), None, "once each");
        let (exit, because) = process.exited().expect("it ran");
        assert!(exit.expected, "stopped, not failed");
        assert!(matches!(because, Some(Because::Hibernated(_))), "still a hibernation");

        // Reaped when idle: the same.
        let mut process = Supervision::new(IDLE, start);
        let epoch = process.next_epoch();
        process.started(epoch, start, 0);
        process.became_ready(start);
        assert_eq!(process.timers(start + IDLE, true), Some(Due::Idle));
        let lingering = start + IDLE + CLOSE_GRACE;
        assert_eq!(process.deadline(false), Some(lingering));
        assert_eq!(process.timers(lingering, false), Some(Due::Lingering));

        // A SIGTERM already sent keeps its own grace: no second one.
        let mut process = Supervision::new(IDLE, start);
        let epoch = process.next_epoch();
        process.started(epoch, start, 0);
        process.became_ready(start);
        assert_eq!(process.kill(false, start), Some(Control::Terminate));
        assert_eq!(process.stop(start), Some(Control::CloseInput));
        assert_eq!(process.deadline(false), Some(start + KILL_GRACE));
        assert_eq!(process.timers(start + KILL_GRACE, false), Some(Due::Unyielding));
        assert_eq!(process.timers(start + KILL_GRACE * 3, false), None);
    }

    #[test]
    fn a_drain_waits_for_the_turn_and_a_stronger_mode_takes_over() {
        let start = Instant::now();
        let mut process = Supervision::new(IDLE, start);
        let (reply, mut done) = oneshot::channel();
        assert_eq!(
            process.shut_down(ShutdownMode::Drain, reply, false, start),
            Shutting::NoProcess
        );
        assert!(done.try_recv().is_ok(), "nothing ran: answered at once");

        let mut process = Supervision::new(IDLE, start);
        let epoch = process.next_epoch();
        process.started(epoch, start, 0);
        process.became_ready(start);
        let (reply, mut drained) = oneshot::channel();
        assert_eq!(
            process.shut_down(ShutdownMode::Drain, reply, true, start),
            Shutting::Then(None)
        );
        assert_eq!(process.inactive(start), Some(Control::CloseInput), "the turn ended: stop");
        let (reply, _killed) = oneshot::channel();
        assert_eq!(
            process.shut_down(ShutdownMode::Kill, reply, true, start),
            Shutting::Then(Some(Control::Kill))
        );
        assert!(process.exited().expect("it ran").0.expected);
        assert!(drained.try_recv().is_err(), "answered once the host is done");
        assert!(process.finish_shutdown());
        assert!(drained.try_recv().is_ok());
    }

    #[test]
    fn a_terminate_while_active_waits_for_the_agent_to_go_inactive() {
        let start = Instant::now();
        let mut process = Supervision::new(IDLE, start);
        assert_eq!(process.terminate(true, start), (false, None), "nothing runs");
        let epoch = process.next_epoch();
        process.started(epoch, start, 0);
        process.became_ready(start);
        assert_eq!(process.terminate(true, start), (true, None));
        assert!(!process.at_rest());
        assert_eq!(process.inactive(start), Some(Control::CloseInput));
        let (exit, _) = process.exited().expect("it ran");
        assert!(exit.expected);
        assert!(process.at_rest());
        let (reply, mut answered) = oneshot::channel();
        assert!(!process.await_exit(reply), "no process: answered at once");
        assert!(answered.try_recv().is_ok());
    }
}
