//! Search across every agent's sessions (`search.query`, the daemon's
//! index; docs/PROTOCOL-NOTES.md, "Search"): the search box's words, the
//! results grouped by agent, and the one query in flight. Typing never
//! floods the daemon: while a query is out, the newest words wait, and go
//! when its answer comes; an answer to words no longer in the box is
//! dropped.

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::message::Response;
use shard_protocol::search::{SearchHit, SearchQuery, SearchResults};

use crate::kept::Kept;
use crate::link::{Link, Request};

/// Results asked for at once: more than a person reads in a list.
const LIMIT: u32 = 50;

/// One agent's results, best first; the groups in the order of their best.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub agent_id: String,
    pub hits: Vec<SearchHit>,
}

/// What the search box shows below it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Nothing asked (the box is empty).
    Nothing,
    Searching,
    /// The daemon's results, decoded by the panel that shows them.
    Found(Kept<SearchResults>),
    Failed(String),
}

#[derive(Clone, Copy)]
pub struct Search {
    pub open: RwSignal<bool>,
    /// The words in the box.
    pub text: RwSignal<String>,
    pub outcome: RwSignal<Outcome>,
    /// Whether a query is out, and whether newer words wait for its answer.
    in_flight: StoredValue<bool>,
    link: Link,
}

/// `hits` grouped by agent, each group in the order of its best hit.
pub fn grouped(hits: Vec<SearchHit>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for hit in hits {
        match groups.iter_mut().find(|group| group.agent_id == hit.agent_id) {
            Some(group) => group.hits.push(hit),
            None => groups.push(Group { agent_id: hit.agent_id.clone(), hits: vec![hit] }),
        }
    }
    groups
}

impl Search {
    pub fn new(link: Link) -> Self {
        Self {
            open: RwSignal::new(false),
            text: RwSignal::new(String::new()),
            outcome: RwSignal::new(Outcome::Nothing),
            in_flight: StoredValue::new(false),
            link,
        }
    }

    /// The words in the box changed: searched now, or once the query out
    /// is answered.
    pub fn typed(&self, text: String) {
        self.text.set(text);
        if !self.in_flight.get_value() {
            self.ask();
        }
    }

    fn ask(&self) {
        let query = self.text.get_untracked().trim().to_owned();
        if query.is_empty() {
            self.outcome.set(Outcome::Nothing);
            return;
        }
        self.outcome.set(Outcome::Searching);
        let message = SearchQuery { query: query.clone(), limit: Some(LIMIT), agent_id: None };
        let request = Request::Search { query };
        let sent = self.link.send(ClientMessage::SearchQuery(message), None, request);
        self.in_flight.set_value(sent);
        if !sent {
            self.outcome.set(Outcome::Failed(crate::link::NOT_CONNECTED.to_owned()));
        }
    }

    /// The answer to the query for `query`.
    pub fn answered(&self, query: String, response: &Response) {
        self.in_flight.set_value(false);
        if self.text.with_untracked(|text| text.trim() != query) {
            // The box says something else by now: ask that instead.
            self.ask();
            return;
        }
        self.outcome.set(match &response.outcome {
            Ok(found) => Outcome::Found(Kept::new(found.clone().unwrap_or_default())),
            Err(error) => Outcome::Failed(error.message.clone()),
        });
    }

    /// The connection dropped: nothing asked on it will be answered.
    pub fn lost(&self) {
        if self.in_flight.get_value() {
            self.in_flight.set_value(false);
            self.outcome.set(Outcome::Failed("Not connected; search again in a moment.".into()));
        }
    }
}
