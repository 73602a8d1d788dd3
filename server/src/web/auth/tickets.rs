//! WebSocket tickets: 256-bit random, only their SHA-256 kept, single-use,
//! living at most [`TICKET_TTL`], and bound to the principal, the session
//! and the exact Origin of the `/bootstrap` request that got them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use super::{Session, lock, random_token, sha256};

/// How long a WebSocket ticket stays valid (CONTRACT.md: at most 60 s).
pub const TICKET_TTL: Duration = Duration::from_secs(30);
/// Outstanding tickets kept; a browser needs one per connection attempt.
const MAX_TICKETS: usize = 1024;

struct Ticket {
    sha256: [u8; 32],
    session_id: String,
    principal_id: String,
    origin: String,
    expires: Instant,
}

/// The tickets outstanding.
#[derive(Default)]
pub(super) struct Tickets {
    tickets: Mutex<Vec<Ticket>>,
}

impl Tickets {
    /// A single-use ticket for one WebSocket upgrade from `origin`.
    pub fn issue(&self, session: &Session, origin: &str) -> String {
        let ticket = random_token(32);
        let mut tickets = lock(&self.tickets);
        let now = Instant::now();
        tickets.retain(|ticket| ticket.expires > now);
        if tickets.len() >= MAX_TICKETS {
            tickets.remove(0);
        }
        tickets.push(Ticket {
            sha256: sha256(&ticket),
            session_id: session.session_id.clone(),
            principal_id: session.principal_id.clone(),
            origin: origin.to_owned(),
            expires: now + TICKET_TTL,
        });
        ticket
    }

    /// Consumes a ticket, whatever the outcome: its session, if it was
    /// valid for `origin` (the caller checks the session is still live).
    pub fn redeem(&self, ticket: &str, origin: &str) -> Option<Session> {
        let digest = sha256(ticket);
        let redeemed = {
            let mut tickets = lock(&self.tickets);
            let at = tickets.iter().position(|known| bool::from(known.sha256.ct_eq(&digest)))?;
            tickets.remove(at)
        };
        if redeemed.expires <= Instant::now() || redeemed.origin != origin {
            return None;
        }
        Some(Session { session_id: redeemed.session_id, principal_id: redeemed.principal_id })
    }
}
