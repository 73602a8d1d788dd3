//! What the page knows, as slices that each own their signals and apply
//! the server messages they care about: the roster (every agent), the
//! screen (the agent on screen: its transcript, catalogs and drafts), the
//! questions, the jobs, the workspaces and the ledger, and the link they
//! all send through; the search across every agent and the find in the
//! transcript on screen; and the pairing dialog's state. One `ClientState` is provided through Leptos context;
//! components take it with `views::state()` and read the slice they show.
//!
//! The few actions that span slices live here: opening an agent (or a
//! search result in its transcript), and telling which workspace is on
//! screen; and which pane a narrow screen
//! shows ([`Pane`]).

use leptos::prelude::*;
use shard_protocol::search::SearchHit;
use shard_protocol::workspace::WorkspaceSummary;

use crate::find::{Find, Target};
use crate::fleet::Fleet;
use crate::jobs::Jobs;
use crate::ledger::Ledger;
use crate::link::Link;
use crate::nodes::Nodes;
use crate::pairing::Pairing;
use crate::questions::Questions;
use crate::roster::Roster;
use crate::screen::Screen;
use crate::search::Search;
use crate::workspaces::Workspaces;

/// The pane a narrow screen shows: it has room for one at a time. A wide
/// one shows them side by side and ignores this.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    List,
    Agent,
    Inbox,
}

impl Pane {
    pub fn key(self) -> &'static str {
        match self {
            Pane::List => "list",
            Pane::Agent => "agent",
            Pane::Inbox => "inbox",
        }
    }
}

#[derive(Clone)]
pub struct ClientState {
    pub link: Link,
    pub pane: RwSignal<Pane>,
    pub roster: Roster,
    pub screen: Screen,
    pub questions: Questions,
    pub jobs: Jobs,
    pub workspaces: Workspaces,
    pub ledger: Ledger,
    pub pairing: Pairing,
    /// The "Notifications" dialog's open state.
    pub push: crate::device::DialogPanel,
    /// The "This browser" dialog's (a passkey, signing out).
    pub browser: crate::device::DialogPanel,
    pub search: Search,
    pub find: Find,
    pub fleet: Fleet,
    pub nodes: Nodes,
}

impl ClientState {
    pub fn new() -> Self {
        let link = Link::new();
        let screen = Screen::new(link);
        let on_screen = screen.selected.read_only();
        Self {
            link,
            pane: RwSignal::new(Pane::List),
            roster: Roster::new(link),
            screen,
            questions: Questions::new(link, on_screen),
            jobs: Jobs::new(link),
            workspaces: Workspaces::new(link),
            ledger: Ledger::new(link, on_screen),
            pairing: Pairing::new(),
            push: crate::device::DialogPanel::new(),
            browser: crate::device::DialogPanel::new(),
            search: Search::new(link),
            find: Find::new(screen.transcript, screen.window_start),
            fleet: Fleet::new(link),
            nodes: Nodes::new(link),
        }
    }

    /// Shows an agent: it becomes this tab's one interactive attachment,
    /// and on a narrow screen its pane comes up. `None` goes back to the
    /// list.
    pub fn select(&self, agent_id: Option<String>) {
        self.pane.set(if agent_id.is_some() { Pane::Agent } else { Pane::List });
        let previous = self.screen.selected.get_untracked();
        if previous == agent_id {
            return;
        }
        if let Some(agent_id) = &agent_id {
            self.roster.mark_read(agent_id);
        }
        self.ledger.clear();
        self.find.clear();
        self.fleet.shown(agent_id.as_deref());
        self.screen.show(previous, agent_id);
        // Panels left open show the new agent's, not nothing.
        self.ledger.refresh_open_panels();
    }

    /// The list on screen instead of the agent, whose row is brought into
    /// view (on a phone the list is another pane).
    pub fn show_list(&self) {
        let left = self.screen.selected.get_untracked();
        self.select(None);
        #[cfg(feature = "hydrate")]
        if let Some(agent_id) = left {
            crate::reveal::reveal(
                format!("li.agent[data-agent-id=\"{agent_id}\"]"),
                Some("button.open"),
            );
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = left;
    }

    /// The workspace of the agent on screen, if it works in one (tracked).
    pub fn shown_workspace(&self) -> Option<WorkspaceSummary> {
        let selected = self.screen.selected.get()?;
        let (cwd, node) = self.roster.place_of(&selected)?;
        self.workspaces.of_place(&cwd, node.as_deref())
    }

    /// Opens a search result: its agent, and in its transcript the
    /// message, marked, once the transcript holds it. A message of another
    /// session of the agent waits for the user to switch to that session
    /// (the sessions panel offers it).
    pub fn open_hit(&self, hit: &SearchHit) {
        self.search.open.set(false);
        let already = self.screen.shows(&hit.agent_id);
        self.select(Some(hit.agent_id.clone()));
        self.find.aim(Target {
            agent_id: hit.agent_id.clone(),
            session_id: hit.session_id.clone(),
            entry_id: hit.entry_id.clone(),
            active: hit.active,
        });
        if !hit.active {
            self.ledger.offer_session(&hit.session_id);
        } else if already {
            // Rows this tab showed before their entries were known (its own
            // prompts) learn them from a sync, which then marks the message.
            self.screen.resync(&hit.agent_id);
        }
    }

    /// The transcript of `agent_id` is on screen: the search result waiting
    /// for it is marked, or the user told why it cannot be.
    pub fn seek(&self, agent_id: &str) {
        if let Some(note) = self.find.seek(agent_id) {
            self.ledger.tell(note, false);
        }
    }

    /// The connection is gone: nothing sent on it will be answered.
    pub fn connection_lost(&self) {
        self.link.lost();
        self.questions.lost();
        self.search.lost();
    }
}

impl Default for ClientState {
    fn default() -> Self {
        Self::new()
    }
}
