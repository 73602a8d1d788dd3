//! The connections attached to one agent, each with its role, and the
//! fan-out of the agent's events to them.

use std::collections::HashMap;

use shard_protocol::orchestrator::AttachRole;

use crate::agents::{Sub, SubscriberId, Wire};

/// One connection attached to the agent.
struct Attached {
    subscriber: Sub,
    role: AttachRole,
}

#[derive(Default)]
pub(super) struct Attachments {
    by_id: HashMap<SubscriberId, Attached>,
}

impl Attachments {
    /// Attaches `subscriber`, or changes its role if it already is.
    pub fn insert(&mut self, subscriber: Sub, role: AttachRole) {
        self.by_id.insert(subscriber.id(), Attached { subscriber, role });
    }

    /// Detaches `subscriber`; its role, if it was attached.
    pub fn remove(&mut self, subscriber: SubscriberId) -> Option<AttachRole> {
        self.by_id.remove(&subscriber).map(|attached| attached.role)
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn subscribers(&self) -> impl Iterator<Item = &Sub> {
        self.by_id.values().map(|attached| &attached.subscriber)
    }

    /// Sends bytes to every attached connection.
    pub fn fan_out(&self, bytes: &Wire) {
        for subscriber in self.subscribers() {
            subscriber.push(bytes.clone());
        }
    }

    /// Gives back the room the map grew to (a host going dormant).
    pub fn shed(&mut self) {
        self.by_id = HashMap::new();
    }
}
