//! What the page knows, as slices that each own their signals and apply
//! the server messages they care about: the roster (every agent), the
//! screen (the agent on screen: its transcript, catalogs and drafts), the
//! questions, the jobs, the workspaces and the ledger, and the link they
//! all send through; and the pairing dialog's state. One `ClientState` is provided through Leptos context;
//! components take it with `views::state()` and read the slice they show.
//!
//! The few actions that span slices live here: opening an agent, and
//! telling which workspace is on screen; and which pane a narrow screen
//! shows ([`Pane`]).

use leptos::prelude::*;
use shard_protocol::workspace::WorkspaceSummary;

use crate::jobs::Jobs;
use crate::ledger::Ledger;
use crate::link::Link;
use crate::pairing::Pairing;
use crate::questions::Questions;
use crate::roster::Roster;
use crate::screen::Screen;
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
        self.screen.show(previous, agent_id);
        // Panels left open show the new agent's, not nothing.
        self.ledger.refresh_open_panels();
    }

    /// The workspace of the agent on screen, if it works in one (tracked).
    pub fn shown_workspace(&self) -> Option<WorkspaceSummary> {
        let selected = self.screen.selected.get()?;
        let cwd = self.roster.cwd_of(&selected)?;
        self.workspaces.of_cwd(&cwd)
    }

    /// The connection is gone: nothing sent on it will be answered.
    pub fn connection_lost(&self) {
        self.link.lost();
        self.questions.lost();
    }
}

impl Default for ClientState {
    fn default() -> Self {
        Self::new()
    }
}
