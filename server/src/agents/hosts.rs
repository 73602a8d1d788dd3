//! Where the registry keeps its agents. An agent that is doing something (a
//! process starting or running, an attachment, an open question, work in
//! flight) has its host actor, a task with its queues; one that is doing
//! nothing is dormant: only its host's state is kept, no task, no queue. A
//! daemon lists every agent it ever made (PROTOCOL.md: durable identity,
//! never deleted), so what a listed agent costs is what a dormant one does.
//!
//! Every command to an agent goes through here: a dormant host is woken by
//! the first one, under the same lock that a host going dormant takes. A
//! host goes dormant only when nothing is queued for it and nobody holds a
//! way to queue something (its handle is held here alone), so no command
//! can land in a host that has stopped listening.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use shard_protocol::types::AgentInfo;
use tokio::sync::{mpsc, oneshot};

use super::error::AgentError;
use super::fleet::governor::Order;
use super::host::process::Because;
use super::host::{self, Dormancy, Host, HostCommand, HostHandle, ShutdownMode};

/// Why a command did not reach its agent.
#[derive(Debug)]
pub enum Refused {
    /// No such agent.
    NotFound,
    /// Its queue is full: a flood.
    Busy,
    /// Its host ended without going dormant (it failed).
    Gone,
}

impl Refused {
    /// The refusal of a command for `agent_id`, as the registry says it.
    pub fn for_agent(self, agent_id: &str) -> AgentError {
        match self {
            Refused::NotFound => AgentError::NoAgent(agent_id.to_owned()),
            Refused::Busy => AgentError::HostBusy { queue: host::HOST_QUEUE },
            Refused::Gone => AgentError::HostGone,
        }
    }
}

fn refused<T>(error: mpsc::error::TrySendError<T>) -> Refused {
    match error {
        mpsc::error::TrySendError::Full(_) => Refused::Busy,
        mpsc::error::TrySendError::Closed(_) => Refused::Gone,
    }
}

enum Slot {
    Awake(HostHandle),
    Dormant(Box<Host>),
}

#[derive(Default)]
struct Slots {
    agents: BTreeMap<String, Slot>,
    /// The daemon is shutting down, and how: a host woken now is told so
    /// before anything else, and starts no process.
    shutting_down: Option<ShutdownMode>,
}

#[derive(Default)]
pub struct Hosts {
    slots: Mutex<Slots>,
}

impl Hosts {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lists `host`, dormant until a command arrives for it.
    pub fn insert(&self, host: Box<Host>) {
        let agent_id = host.agent_id().to_owned();
        self.slots().agents.insert(agent_id, Slot::Dormant(host));
    }

    pub fn contains(&self, agent_id: &str) -> bool {
        self.slots().agents.contains_key(agent_id)
    }

    /// The agent as `agent.list` shows it.
    pub fn info(&self, agent_id: &str) -> Option<AgentInfo> {
        self.slots().agents.get(agent_id).map(Slot::info)
    }

    pub fn list(&self) -> Vec<AgentInfo> {
        self.slots().agents.values().map(Slot::info).collect()
    }

    /// Hosts with a task right now (the rest are dormant).
    pub fn awake(&self) -> usize {
        let slots = self.slots();
        slots.agents.values().filter(|slot| matches!(slot, Slot::Awake(_))).count()
    }

    /// Queues `command` for the agent without waiting, waking it if needed.
    pub fn send(self: &Arc<Self>, agent_id: &str, command: HostCommand) -> Result<(), Refused> {
        let mut slots = self.slots();
        let handle = self.awaken(&mut slots, agent_id)?;
        handle.commands.try_send(command).map_err(refused)
    }

    /// Queues `command`, waiting for room if the agent's queue is full (for
    /// what must arrive: a connection's end, a daemon shutdown).
    pub async fn send_waiting(
        self: &Arc<Self>,
        agent_id: &str,
        command: HostCommand,
    ) -> Result<(), Refused> {
        let commands = {
            let mut slots = self.slots();
            let handle = self.awaken(&mut slots, agent_id)?;
            match handle.commands.try_send(command) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(Refused::Gone),
                // Held outside the lock: while it is, the host stays awake.
                Err(mpsc::error::TrySendError::Full(command)) => (handle.commands.clone(), command),
            }
        };
        let (sender, command) = commands;
        sender.send(command).await.map_err(|_| Refused::Gone)
    }

    /// The daemon is shutting down: no host woken from now on starts a
    /// process. Returns every agent that is awake now, to be told.
    pub fn shutting_down(&self, mode: ShutdownMode) -> Vec<String> {
        let mut slots = self.slots();
        slots.shutting_down = slots.shutting_down.max(Some(mode));
        let awake = slots.agents.iter().filter(|(_, slot)| matches!(slot, Slot::Awake(_)));
        awake.map(|(agent_id, _)| agent_id.clone()).collect()
    }

    /// The agent's handle, its host woken first if it was dormant.
    fn awaken<'a>(
        self: &Arc<Self>,
        slots: &'a mut Slots,
        agent_id: &str,
    ) -> Result<&'a HostHandle, Refused> {
        if let Some(Slot::Dormant(_)) = slots.agents.get(agent_id) {
            let Some(Slot::Dormant(dormant)) = slots.agents.remove(agent_id) else {
                unreachable!("dormant just above, under the same lock")
            };
            let handle = host::wake(dormant, self.clone());
            if let Some(mode) = slots.shutting_down {
                let (reply, _) = oneshot::channel();
                let _ = handle.commands.try_send(HostCommand::Shutdown { mode, reply });
            }
            slots.agents.insert(agent_id.to_owned(), Slot::Awake(handle));
        }
        match slots.agents.get(agent_id) {
            Some(Slot::Awake(handle)) => Ok(handle),
            _ => Err(Refused::NotFound),
        }
    }
}

impl Dormancy for Hosts {
    /// `host`, idle with nothing left to do, goes dormant, unless a command
    /// is queued for it or someone holds its handle (and may queue one):
    /// then it is handed back and stays awake.
    fn retire(
        &self,
        host: Box<Host>,
        inbox: &mpsc::Receiver<HostCommand>,
    ) -> Result<(), Box<Host>> {
        let mut slots = self.slots();
        // The slot's handle is the only sender left, and nothing is queued.
        if !inbox.is_empty() || inbox.sender_strong_count() > 1 {
            return Err(host);
        }
        match slots.agents.get_mut(host.agent_id()) {
            Some(slot @ Slot::Awake(_)) => {
                let mut host = host;
                host.shed();
                *slot = Slot::Dormant(host);
                Ok(())
            }
            _ => Err(host),
        }
    }
}

impl Slot {
    fn info(&self) -> AgentInfo {
        match self {
            Slot::Awake(handle) => handle.info(),
            Slot::Dormant(host) => host.info(),
        }
    }
}

impl super::fleet::Governed for Hosts {
    /// Hands the governor's order to the agent's host, without waiting: a
    /// host woken for it finds nothing running and does nothing.
    fn order(&self, order: Order) {
        let (agent_id, because) = match order {
            Order::Hibernate { agent_id, reason } => (agent_id, Because::Hibernated(reason)),
            Order::Stop { agent_id, reason } => (agent_id, Because::OverCeiling(reason)),
        };
        let slots = self.slots();
        let sent = match slots.agents.get(&agent_id) {
            Some(Slot::Awake(handle)) => {
                handle.commands.try_send(HostCommand::Limit(because)).map_err(refused)
            }
            // Dormant: it has no process to stop.
            Some(Slot::Dormant(_)) => Ok(()),
            None => Err(Refused::NotFound),
        };
        drop(slots);
        if let Err(refused) = sent {
            tracing::warn!(agent = %agent_id, ?refused, "a fleet order did not reach its agent");
        }
    }

    /// Tells every awake host, without waiting; a dormant one has no
    /// process to hold and looks when it starts one. A host whose queue is
    /// full looks after its agent's next call.
    fn review_budgets(&self) {
        let slots = self.slots();
        for (agent_id, slot) in &slots.agents {
            if let Slot::Awake(handle) = slot
                && handle.commands.try_send(HostCommand::Budgets).is_err()
            {
                tracing::warn!(agent = %agent_id, "a budget change did not reach its agent's host yet");
            }
        }
    }
}
