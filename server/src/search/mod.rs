//! Full-text search across every agent's sessions (docs/ARCHITECTURE.md,
//! "Search"): one thread owns the index (`index`, SQLite FTS5 in
//! `$SHARD_HOME/search.db`) and does all of its work, in order:
//!
//! - **Catching up** at start, without holding the start up: every session
//!   log on disk is listed under the agent that runs it (or, for a session
//!   no agent runs now, the agent it was listed under, else the oldest
//!   agent running its lineage), and read from where the index stopped.
//!   Sessions whose log or agent is gone leave the index.
//! - **Following** the agents: a host tells [`Search::touched`] when one of
//!   its messages completed or its turn ended, and the thread reads what
//!   was appended to that session's log since. The session logs are the
//!   truth; the index only ever reads them, so it can always be rebuilt.
//! - **Answering** `search.query` ([`Search::query`]) between two steps of
//!   that work, each step bounded ([`STEP_BYTES`]), so a query never
//!   waits for a long catch-up.
//!
//! The thread's queue is bounded ([`QUEUE`]); a query that finds it full
//! is answered CONFLICT. Touches never wait and are never lost: they land
//! in a set of sessions to read (one entry per session however often it is
//! touched), and the thread looks at the set after every job.

mod error;
mod index;
mod words;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};

use shard_platform::session_view::{self, SessionError};
use tokio::sync::oneshot;

pub use self::error::SearchError;
use self::index::Index;
pub use self::index::{Found, MESSAGE_BYTES, SearchLimits};

/// Jobs waiting for the search thread: queries from every connection and
/// the daemon's catch-up. Queries take milliseconds, so 64 waiting means a
/// flood, and the next one is told to try again rather than queued.
const QUEUE: usize = 64;
/// Bytes of one session log read in one step of the thread's work: a few
/// milliseconds, after which waiting queries go first.
const STEP_BYTES: u64 = 1024 * 1024;
/// Sessions waiting to be read, touched since the thread last looked: one
/// per session, so at most as many as agents run. Past this (a daemon with
/// more running sessions than anyone has) a touch is dropped, and the next
/// start catches the session up.
const MAX_TOUCHED: usize = 65_536;
/// Session logs listed at start, at most.
const MAX_SESSIONS: usize = 1_000_000;
/// The query text's length, at most.
pub const MAX_QUERY_BYTES: usize = 1000;
/// Results of one query: by default, and at most.
pub const DEFAULT_LIMIT: u32 = 20;
pub const MAX_LIMIT: u32 = 100;

/// The index's file in `$SHARD_HOME`.
pub const FILE: &str = "search.db";

/// An agent and the session it runs, as the registry has it at start.
#[derive(Debug, Clone)]
pub struct Owner {
    pub agent_id: String,
    pub session_id: String,
    pub created_at: u64,
}

/// A query, checked.
struct Asked {
    expression: String,
    agent_id: Option<String>,
    limit: u32,
    reply: oneshot::Sender<Result<Vec<Found>, SearchError>>,
}

enum Job {
    /// The set of touched sessions has something in it.
    Wake,
    CatchUp(Vec<Owner>),
    Query(Asked),
}

/// The handle every host and the `search.query` command share.
pub struct Search {
    jobs: SyncSender<Job>,
    touched: Arc<Mutex<HashMap<String, String>>>,
}

impl Search {
    /// Starts the search thread on `$SHARD_HOME/search.db`. The index is
    /// opened by the thread: a slow or broken one holds up nothing, and
    /// queries say why it is unavailable.
    pub fn start(home: &Path, limits: SearchLimits) -> Arc<Self> {
        let (jobs, receiver) = std::sync::mpsc::sync_channel(QUEUE);
        let touched = Arc::new(Mutex::new(HashMap::new()));
        let search = Arc::new(Self { jobs, touched: touched.clone() });
        let worker = Worker {
            home: home.to_owned(),
            limits,
            touched,
            backlog: VecDeque::new(),
            index: Opened::NotYet,
        };
        let spawned = std::thread::Builder::new()
            .name("search-index".into())
            .spawn(move || worker.run(receiver));
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the search thread: search is unavailable");
        }
        search
    }

    /// A handle whose touches go nowhere and whose queries answer that
    /// search is unavailable (unit tests of the hosts).
    pub fn detached() -> Arc<Self> {
        let (jobs, _) = std::sync::mpsc::sync_channel(1);
        Arc::new(Self { jobs, touched: Arc::default() })
    }

    fn touched(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.touched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `agent_id` runs `session_id`, whose log has grown: read it soon.
    /// Never waits.
    pub fn touch(&self, agent_id: &str, session_id: &str) {
        let first = {
            let mut touched = self.touched();
            if touched.len() >= MAX_TOUCHED && !touched.contains_key(session_id) {
                tracing::warn!(session_id, "too many sessions waiting for the search index");
                return;
            }
            let first = touched.is_empty();
            touched.insert(session_id.to_owned(), agent_id.to_owned());
            first
        };
        // A full queue is read before the thread looks at the set again.
        if first {
            let _ = self.jobs.try_send(Job::Wake);
        }
    }

    /// Catches the index up with the session logs on disk, for `owners`
    /// (every agent and its session).
    pub fn catch_up(&self, owners: Vec<Owner>) {
        if let Err(error) = self.jobs.try_send(Job::CatchUp(owners)) {
            tracing::warn!(%error, "the search index cannot catch up");
        }
    }

    /// The best matches of `query`'s words (of one agent's messages if it
    /// names one), best first.
    pub async fn query(
        &self,
        query: &str,
        agent_id: Option<String>,
        limit: Option<u32>,
    ) -> Result<Vec<Found>, SearchError> {
        if query.len() > MAX_QUERY_BYTES {
            return Err(SearchError::TooLong { max: MAX_QUERY_BYTES });
        }
        if query.trim().is_empty() {
            return Err(SearchError::Empty);
        }
        let expression = words::expression(query).ok_or(SearchError::NoWords)?;
        let limit = match limit {
            Some(0) => return Err(SearchError::ZeroLimit),
            Some(limit) => limit.min(MAX_LIMIT),
            None => DEFAULT_LIMIT,
        };
        let (reply, answer) = oneshot::channel();
        let asked = Asked { expression, agent_id, limit, reply };
        match self.jobs.try_send(Job::Query(asked)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(SearchError::Busy),
            Err(TrySendError::Disconnected(_)) => {
                return Err(SearchError::Unavailable("the search thread has stopped".into()));
            }
        }
        answer
            .await
            .map_err(|_| SearchError::Unavailable("the search thread has stopped".into()))?
    }
}

/// One session to read, and the agent to list it under.
struct Task {
    session_id: String,
    agent_id: String,
}

/// The search thread's state.
struct Worker {
    home: PathBuf,
    limits: SearchLimits,
    touched: Arc<Mutex<HashMap<String, String>>>,
    /// Sessions to catch up, and sessions whose read was cut by the step
    /// budget: read after what was touched.
    backlog: VecDeque<Task>,
    index: Opened,
}

/// The index as the search thread holds it.
enum Opened {
    /// The thread has not opened it yet.
    NotYet,
    Ready(Index),
    /// It could not be opened: why, as every query is told.
    Unavailable {
        why: String,
    },
}

impl Worker {
    fn run(mut self, jobs: Receiver<Job>) {
        let path = self.home.join(FILE);
        self.index = match Index::open(&path, self.limits) {
            Ok(index) => Opened::Ready(index),
            Err(error) => {
                tracing::error!(%error, path = %path.display(), "search is unavailable");
                Opened::Unavailable { why: error.to_string() }
            }
        };
        loop {
            // Waiting jobs first, queries above all; then one step of
            // reading; then sleep until a job comes.
            loop {
                match jobs.try_recv() {
                    Ok(job) => self.handle(job),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            if let Some(task) = self.next_task() {
                self.step(task);
                continue;
            }
            match jobs.recv() {
                Ok(job) => self.handle(job),
                Err(_) => return,
            }
        }
    }

    fn handle(&mut self, job: Job) {
        match job {
            Job::Wake => {}
            Job::CatchUp(owners) => self.plan_catch_up(owners),
            Job::Query(asked) => {
                let answer = match &self.index {
                    Opened::Ready(index) => {
                        index.query(&asked.expression, asked.agent_id.as_deref(), asked.limit)
                    }
                    Opened::NotYet => Err(SearchError::Unavailable("not opened yet".to_owned())),
                    Opened::Unavailable { why } => Err(SearchError::Unavailable(why.clone())),
                };
                let _ = asked.reply.send(answer);
            }
        }
    }

    /// What was touched first, then the backlog.
    fn next_task(&mut self) -> Option<Task> {
        let touched = {
            let mut touched = self.touched.lock().unwrap_or_else(PoisonError::into_inner);
            let key = touched.keys().next().cloned();
            key.and_then(|session_id| touched.remove_entry(&session_id))
        };
        match touched {
            Some((session_id, agent_id)) => Some(Task { session_id, agent_id }),
            None => self.backlog.pop_front(),
        }
    }

    /// Reads one step of a session's log into the index; what is left is
    /// queued again.
    fn step(&mut self, task: Task) {
        let Opened::Ready(index) = &mut self.index else { return };
        let result = (|| -> Result<bool, SearchError> {
            let offset = index.read_to(&task.session_id)?;
            let read =
                match session_view::read_messages(&self.home, &task.session_id, offset, STEP_BYTES)
                {
                    Ok(read) => read,
                    Err(SessionError::NotFound(_)) => {
                        index.forget(&task.session_id)?;
                        return Ok(false);
                    }
                    Err(error) => return Err(SearchError::Unavailable(error.to_string())),
                };
            if read.shrunk {
                index.forget(&task.session_id)?;
                return Ok(true);
            }
            index.add(&task.session_id, &task.agent_id, &read)?;
            Ok(read.more)
        })();
        match result {
            Ok(true) => self.backlog.push_back(task),
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, session_id = %task.session_id, "cannot index the session");
            }
        }
    }

    /// Lists every session log on disk under its agent (module docs) and
    /// queues each to be read from where the index stopped; forgets the
    /// sessions that have no log or no agent any more.
    fn plan_catch_up(&mut self, mut owners: Vec<Owner>) {
        let Opened::Ready(index) = &mut self.index else { return };
        let stored = session_view::stored_sessions(&self.home, MAX_SESSIONS);
        let indexed = match index.sessions() {
            Ok(indexed) => indexed,
            Err(error) => {
                tracing::warn!(%error, "the search index cannot catch up");
                return;
            }
        };
        // The oldest agent running a session of each lineage comes first.
        owners.sort_by(|a, b| (a.created_at, &a.agent_id).cmp(&(b.created_at, &b.agent_id)));
        let lineage_of: HashMap<&str, &str> = stored
            .sessions
            .iter()
            .map(|session| (session.session_id.as_str(), session.lineage.as_str()))
            .collect();
        let agents: HashSet<&str> = owners.iter().map(|owner| owner.agent_id.as_str()).collect();
        let runs: HashMap<&str, &str> = owners
            .iter()
            .map(|owner| (owner.session_id.as_str(), owner.agent_id.as_str()))
            .collect();
        let mut lineage_owner: HashMap<&str, &str> = HashMap::new();
        for owner in &owners {
            if let Some(lineage) = lineage_of.get(owner.session_id.as_str()) {
                lineage_owner.entry(*lineage).or_insert(owner.agent_id.as_str());
            }
        }
        let mut tasks = Vec::new();
        let mut orphans = Vec::new();
        for session in &stored.sessions {
            let id = session.session_id.as_str();
            let agent = runs
                .get(id)
                .copied()
                .or_else(|| indexed.get(id).map(String::as_str).filter(|a| agents.contains(a)))
                .or_else(|| lineage_owner.get(session.lineage.as_str()).copied());
            match agent {
                Some(agent) => tasks.push(Task {
                    session_id: session.session_id.clone(),
                    agent_id: agent.to_owned(),
                }),
                None if indexed.contains_key(id) => orphans.push(session.session_id.clone()),
                None => {}
            }
        }
        if !stored.partial {
            orphans
                .extend(indexed.keys().filter(|id| !lineage_of.contains_key(id.as_str())).cloned());
        }
        for session_id in orphans {
            if let Err(error) = index.forget(&session_id) {
                tracing::warn!(%error, session_id, "cannot remove a session from the search index");
            }
        }
        tracing::debug!(sessions = tasks.len(), "search index catching up");
        self.backlog.extend(tasks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queries_are_checked_before_they_reach_the_index() {
        let search = Search::detached();
        let code = async |text: &str, limit| {
            search.query(text, None, limit).await.map_err(|error| error.to_string())
        };
        assert_eq!(code("   ", None).await, Err(SearchError::Empty.to_string()));
        assert_eq!(code("* - \"", None).await, Err(SearchError::NoWords.to_string()));
        assert_eq!(code("word", Some(0)).await, Err(SearchError::ZeroLimit.to_string()));
        let long = "a".repeat(MAX_QUERY_BYTES + 1);
        assert!(code(&long, None).await.is_err_and(|why| why.contains("longer")));
        // A detached handle has no thread behind it.
        assert!(code("word", None).await.is_err_and(|why| why.contains("unavailable")));
    }
}
