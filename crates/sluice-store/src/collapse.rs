//! Request collapsing: one fetch per key at a time; concurrent requests for the key wait on
//! it and share its response as it streams in.
//!
//! The first request for a key becomes the [`Leader`] and fetches. Others get a [`Pending`]
//! and wait (with a deadline, so a waiter never waits forever) for the leader's [`Outcome`].
//! A leader that goes away without publishing (client gone, task panicked) publishes
//! [`Outcome::Failed`] on drop, and waiters fetch on their own. A leader whose origin failed
//! (unreachable, too slow) publishes [`Outcome::OriginFailed`], and waiters answer with that
//! failure instead of each trying the failing origin again.

use crate::{Fill, Object, ObjectMeta};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What a leader's fetch produced, as seen by the requests collapsed onto it.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A storable response whose body is still arriving: read it from `fill`.
    Filling { meta: Arc<ObjectMeta>, fill: Arc<Fill> },
    /// A complete stored object (e.g. freshened by a 304).
    Stored(Arc<Object>),
    /// The response may not be shared (not storable, too large): fetch on your own.
    NotShareable,
    /// The fetch failed before a response arrived, for reasons of its own (its client went
    /// away, ...): fetch on your own.
    Failed,
    /// The origin failed the fetch (no connection, no response in time): every waiter would
    /// have met the same failure. `status` is the proxy's answer to it (502, 504).
    OriginFailed { status: u16, reason: Arc<str> },
}

type Slot = (u64, watch::Sender<Option<Outcome>>);

/// The table of fetches in flight, by primary key. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Collapser {
    map: Arc<Mutex<HashMap<String, Slot>>>,
    next: Arc<AtomicU64>,
}

/// The result of [`Collapser::join`].
#[derive(Debug)]
pub enum Join {
    /// No fetch in flight: the caller fetches and must publish the outcome.
    Leader(Leader),
    /// A fetch is in flight: wait on it.
    Follower(Pending),
}

impl Collapser {
    /// Joins the fetch in flight for `key`, or becomes its leader.
    pub fn join(&self, key: &str) -> Join {
        let mut map = self.map.lock();
        if let Some((_, tx)) = map.get(key) {
            return Join::Follower(Pending { rx: tx.subscribe() });
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, _) = watch::channel(None);
        map.insert(key.to_owned(), (id, tx));
        Join::Leader(Leader { collapser: self.clone(), key: key.to_owned(), id, published: false })
    }

    /// Number of fetches in flight.
    pub fn in_flight(&self) -> usize {
        self.map.lock().len()
    }

    fn send(&self, key: &str, id: u64, outcome: Outcome, keep: bool) {
        let mut map = self.map.lock();
        if let Some((slot_id, tx)) = map.get(key) {
            if *slot_id == id {
                tx.send_replace(Some(outcome));
                if !keep {
                    map.remove(key);
                }
            }
        }
    }
}

/// The request that fetches for everyone. Dropping it ends the collapse window.
#[derive(Debug)]
pub struct Leader {
    collapser: Collapser,
    key: String,
    id: u64,
    published: bool,
}

impl Leader {
    /// Tells waiters the outcome. A [`Outcome::Filling`] keeps the slot open so requests
    /// arriving during the fill join it too, until the leader is dropped (after the object
    /// is stored); any other outcome closes it at once.
    pub fn publish(&mut self, outcome: Outcome) {
        let keep = matches!(outcome, Outcome::Filling { .. });
        self.published = true;
        self.collapser.send(&self.key, self.id, outcome, keep);
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        let outcome = if self.published { None } else { Some(Outcome::Failed) };
        let mut map = self.collapser.map.lock();
        if let Some((slot_id, tx)) = map.get(&self.key) {
            if *slot_id == self.id {
                if let Some(outcome) = outcome {
                    tx.send_replace(Some(outcome));
                }
                map.remove(&self.key);
            }
        }
    }
}

/// A request waiting on another's fetch.
#[derive(Debug)]
pub struct Pending {
    rx: watch::Receiver<Option<Outcome>>,
}

impl Pending {
    /// Waits up to `deadline` for the leader's outcome; `None` when the deadline passed.
    pub async fn wait(mut self, deadline: Duration) -> Option<Outcome> {
        let waited = tokio::time::timeout(deadline, self.rx.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(outcome)) => outcome.clone(),
            // The sender is gone without an outcome: treat as a failed fetch.
            Ok(Err(_)) => Some(Outcome::Failed),
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_get_the_leaders_outcome() {
        let c = Collapser::default();
        let Join::Leader(mut leader) = c.join("k") else { panic!("first join leads") };
        let Join::Follower(pending) = c.join("k") else { panic!("second join follows") };
        leader.publish(Outcome::NotShareable);
        assert!(matches!(pending.wait(Duration::from_secs(5)).await, Some(Outcome::NotShareable)));
        assert_eq!(c.in_flight(), 0, "a non-filling outcome closes the slot");
    }

    #[tokio::test]
    async fn a_dropped_leader_fails_its_followers_and_frees_the_key() {
        let c = Collapser::default();
        let leader = c.join("k");
        let Join::Follower(pending) = c.join("k") else { panic!("second join follows") };
        drop(leader);
        assert!(matches!(pending.wait(Duration::from_secs(5)).await, Some(Outcome::Failed)));
        assert!(matches!(c.join("k"), Join::Leader(_)));
    }

    #[tokio::test]
    async fn an_origin_failure_reaches_every_follower_and_frees_the_key() {
        let c = Collapser::default();
        let Join::Leader(mut leader) = c.join("k") else { panic!("first join leads") };
        let followers: Vec<_> = (0..3)
            .map(|_| match c.join("k") {
                Join::Follower(pending) => pending,
                Join::Leader(_) => panic!("later joins follow"),
            })
            .collect();
        leader.publish(Outcome::OriginFailed { status: 504, reason: "no response in 3s".into() });
        for pending in followers {
            let outcome = pending.wait(Duration::from_secs(5)).await;
            assert!(matches!(outcome, Some(Outcome::OriginFailed { status: 504, .. })), "{outcome:?}");
        }
        drop(leader);
        assert!(matches!(c.join("k"), Join::Leader(_)), "the next request tries the origin again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_stops_waiting_at_its_deadline() {
        let c = Collapser::default();
        let _leader = c.join("k");
        let Join::Follower(pending) = c.join("k") else { panic!("second join follows") };
        assert!(pending.wait(Duration::from_secs(1)).await.is_none());
    }
}
