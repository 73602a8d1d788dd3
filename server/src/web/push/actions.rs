//! The Allow and Deny of a notification: single-use tokens, each bound to
//! one browser session, one question (its agent and request id), the exact
//! call it asks about (its fingerprint) and an expiry of minutes. The two of
//! a question go together: using either burns both, and the question's end
//! burns them too. A token is a secret: only its digest is kept, compared in
//! constant time, and it never reaches a log.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};
use shard_protocol::agent::Decision;
use subtle::ConstantTimeEq;
use tokio::time::Instant;

use crate::web::auth::random_token;

/// Tokens kept at once; the oldest go first. A question pushed to a few
/// browsers makes two each.
const MAX_ACTIONS: usize = 1024;
/// How long a used-up or expired token is still recognised as such (so the
/// refusal can say which), before it is forgotten.
const REMEMBERED: Duration = Duration::from_secs(3600);

/// What a token lets its bearer do, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub session_id: String,
    pub agent_id: String,
    pub request_id: String,
    pub fingerprint: String,
    pub decision: Decision,
}

/// Why a token does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Never issued, or long forgotten.
    Unknown,
    /// Used already (this one or its pair), or its question closed.
    Used,
    Expired,
    /// Issued to another browser.
    OtherSession,
}

impl Refusal {
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Unknown => "this action is not known here",
            Refusal::Used => "this action was already used, or its question has closed",
            Refusal::Expired => "this action has expired; answer in the app",
            Refusal::OtherSession => "this action was issued to another browser",
        }
    }
}

struct Action {
    sha256: [u8; 32],
    /// The two tokens of one question share it.
    pair: u64,
    grant: Grant,
    expires: Instant,
    /// Set once used or closed: kept a while to say so.
    spent: Option<Instant>,
}

#[derive(Default)]
pub struct Actions {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    actions: VecDeque<Action>,
    next_pair: u64,
}

impl Actions {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// New tokens for the decisions of one question to one browser, valid
    /// for `ttl`; each decision with its token.
    pub fn mint(
        &self,
        grant: &Grant,
        decisions: &[Decision],
        ttl: Duration,
    ) -> Vec<(Decision, String)> {
        let now = Instant::now();
        let mut kept = self.kept();
        kept.actions.retain(|action| {
            let ended = action.spent.unwrap_or(action.expires);
            now.saturating_duration_since(ended) < REMEMBERED
        });
        kept.next_pair += 1;
        let pair = kept.next_pair;
        let mut minted = Vec::new();
        for &decision in decisions {
            let token = random_token(32);
            while kept.actions.len() >= MAX_ACTIONS {
                kept.actions.pop_front();
            }
            kept.actions.push_back(Action {
                sha256: digest(&token),
                pair,
                grant: Grant { decision, ..grant.clone() },
                expires: now + ttl,
                spent: None,
            });
            minted.push((decision, token));
        }
        minted
    }

    /// Uses `token` for `session_id`: its grant, and from now on neither it
    /// nor its pair does anything. A token shown by another browser is
    /// burned too: it was taken from the one it was issued to.
    pub fn redeem(&self, token: &str, session_id: &str) -> Result<Grant, Refusal> {
        let sought = digest(token);
        let now = Instant::now();
        let mut kept = self.kept();
        let found = kept.actions.iter().position(|action| bool::from(action.sha256.ct_eq(&sought)));
        let Some(at) = found else { return Err(Refusal::Unknown) };
        let action = &kept.actions[at];
        let (pair, grant) = (action.pair, action.grant.clone());
        let refusal = if action.spent.is_some() {
            Some(Refusal::Used)
        } else if action.expires <= now {
            Some(Refusal::Expired)
        } else if !bool::from(grant.session_id.as_bytes().ct_eq(session_id.as_bytes())) {
            Some(Refusal::OtherSession)
        } else {
            None
        };
        for action in kept.actions.iter_mut().filter(|action| action.pair == pair) {
            action.spent.get_or_insert(now);
        }
        match refusal {
            Some(refusal) => Err(refusal),
            None => Ok(grant),
        }
    }

    /// A question closed: its tokens do nothing any more.
    pub fn close(&self, agent_id: &str, request_id: &str) {
        let now = Instant::now();
        for action in self.kept().actions.iter_mut().filter(|action| {
            action.grant.agent_id == agent_id && action.grant.request_id == request_id
        }) {
            action.spent.get_or_insert(now);
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(session: &str) -> Grant {
        Grant {
            session_id: session.into(),
            agent_id: "a1".into(),
            request_id: "r1".into(),
            fingerprint: "f".into(),
            decision: Decision::Deny,
        }
    }

    fn pair(actions: &Actions, ttl: Duration) -> (String, String) {
        let minted = actions.mint(&grant("s1"), &[Decision::Allow, Decision::Deny], ttl);
        assert_eq!(
            minted.iter().map(|(decision, _)| *decision).collect::<Vec<_>>(),
            [Decision::Allow, Decision::Deny]
        );
        (minted[0].1.clone(), minted[1].1.clone())
    }

    #[test]
    fn a_token_works_once_and_burns_its_pair() {
        let actions = Actions::default();
        let (allow, deny) = pair(&actions, Duration::from_secs(60));
        let granted = actions.redeem(&allow, "s1").expect("granted");
        assert_eq!(granted.decision, Decision::Allow);
        assert_eq!(actions.redeem(&allow, "s1"), Err(Refusal::Used), "replayed");
        assert_eq!(actions.redeem(&deny, "s1"), Err(Refusal::Used), "its pair");
        assert_eq!(actions.redeem("made-up", "s1"), Err(Refusal::Unknown));
    }

    #[test]
    fn expired_closed_and_stolen_tokens_do_nothing() {
        let actions = Actions::default();
        let (allow, _) = pair(&actions, Duration::ZERO);
        assert_eq!(actions.redeem(&allow, "s1"), Err(Refusal::Expired));

        let (allow, deny) = pair(&actions, Duration::from_secs(60));
        actions.close("a1", "r1");
        assert_eq!(actions.redeem(&allow, "s1"), Err(Refusal::Used));
        assert_eq!(actions.redeem(&deny, "s1"), Err(Refusal::Used));

        let (allow, deny) = pair(&actions, Duration::from_secs(60));
        assert_eq!(actions.redeem(&allow, "s2"), Err(Refusal::OtherSession));
        assert_eq!(actions.redeem(&deny, "s1"), Err(Refusal::Used), "burned by the theft");
    }

    #[test]
    fn the_store_is_bounded() {
        let actions = Actions::default();
        let first = pair(&actions, Duration::from_secs(60));
        for _ in 0..MAX_ACTIONS {
            pair(&actions, Duration::from_secs(60));
        }
        assert!(actions.kept().actions.len() <= MAX_ACTIONS);
        assert_eq!(actions.redeem(&first.0, "s1"), Err(Refusal::Unknown), "the oldest went");
    }
}
