//! Removals (by key, prefix or tag: purges, content deletes, RFC 9111 §4.4 invalidations)
//! recorded for the work in flight on a key: fetches, and the tiers' disk writes and
//! promotions ([`Invalidations::removed_since`]). A body still arriving when its URL is removed is the
//! answer to a request sent before the removal: stored when it completes, it would bring the
//! removed content back. A fetch therefore takes a [`Mark`] before its request goes out, and
//! its body is stored only if nothing recorded since covers it
//! ([`Invalidations::unless_removed_since`]).

use parking_lot::Mutex;
use std::collections::VecDeque;

/// Removals remembered; a fetch older than the oldest one kept is not stored (it may have
/// missed one).
const KEPT: usize = 4096;

/// What a removal covered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    Key(String),
    Prefix(String),
    Tag(String),
}

/// A point in the sequence of removals, taken by a fetch before its request goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(u64);

#[derive(Debug, Default)]
struct Log {
    /// The sequence number the next removal gets.
    next: u64,
    /// The last removals, oldest first, each with its sequence number.
    entries: VecDeque<(u64, Removed)>,
}

/// The recent removals.
#[derive(Debug, Default)]
pub struct Invalidations {
    log: Mutex<Log>,
}

impl Invalidations {
    /// Now, in the sequence of removals.
    pub fn mark(&self) -> Mark {
        Mark(self.log.lock().next)
    }

    /// Records a removal; to be called before the removal itself, so that a store checking
    /// under [`Self::unless_removed_since`] either sees it or stores before it and is
    /// removed by it.
    pub fn record(&self, removed: Removed) {
        let mut log = self.log.lock();
        let seq = log.next;
        log.next += 1;
        if log.entries.len() == KEPT {
            log.entries.pop_front();
        }
        log.entries.push_back((seq, removed));
    }

    /// Runs `store` unless a removal recorded since `since` covers `key` or one of `tags`
    /// (`None` then), under the log's lock, so no removal is recorded in between. `store`
    /// gets the mark of now, for work it leaves to be done after the lock is released; it
    /// must not call back into this log (the lock is not reentrant).
    pub fn unless_removed_since<T>(
        &self,
        since: Mark,
        key: &str,
        tags: impl FnOnce() -> Vec<String>,
        store: impl FnOnce(Mark) -> T,
    ) -> Option<T> {
        let log = self.log.lock();
        let now = Mark(log.next);
        (!Self::covers(&log, since, key, tags)).then(|| store(now))
    }

    /// Whether a removal recorded since `since` covers `key` or one of `tags`: work on the
    /// key that started at `since` (a disk write, a promotion) must be undone.
    pub fn removed_since(&self, since: Mark, key: &str, tags: impl FnOnce() -> Vec<String>) -> bool {
        Self::covers(&self.log.lock(), since, key, tags)
    }

    fn covers(log: &Log, since: Mark, key: &str, tags: impl FnOnce() -> Vec<String>) -> bool {
        if log.next == since.0 {
            return false;
        }
        let oldest = log.entries.front().map_or(log.next, |(seq, _)| *seq);
        if oldest > since.0 {
            return true;
        }
        let tags = tags();
        log.entries.iter().filter(|(seq, _)| *seq >= since.0).any(|(_, removed)| match removed {
            Removed::Key(k) => k == key,
            Removed::Prefix(p) => key.starts_with(p.as_str()),
            Removed::Tag(t) => tags.iter().any(|tag| tag == t),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(log: &Invalidations, since: Mark, key: &str, tags: &[&str]) -> bool {
        let tags = || tags.iter().map(|t| t.to_string()).collect();
        log.unless_removed_since(since, key, tags, |_| ()).is_some()
    }

    #[test]
    fn a_fetch_is_not_stored_after_a_removal_that_covers_it() {
        let log = Invalidations::default();
        let before = log.mark();
        assert!(stored(&log, before, "http://a/x", &[]), "nothing removed");
        log.record(Removed::Key("http://a/y".into()));
        assert!(stored(&log, before, "http://a/x", &[]), "another key");
        log.record(Removed::Prefix("http://b/".into()));
        log.record(Removed::Tag("news".into()));
        assert!(stored(&log, before, "http://a/x", &["sport"]));
        assert!(!stored(&log, before, "http://a/y", &[]));
        assert!(!stored(&log, before, "http://b/z", &[]));
        assert!(!stored(&log, before, "http://a/x", &["news"]));
        let after = log.mark();
        assert!(stored(&log, after, "http://a/y", &["news"]), "a fetch sent after the removals");
    }

    #[test]
    fn a_fetch_older_than_the_removals_kept_is_not_stored() {
        let log = Invalidations::default();
        let old = log.mark();
        for i in 0..=KEPT {
            log.record(Removed::Key(format!("http://a/{i}")));
        }
        assert!(!stored(&log, old, "http://unrelated/", &[]), "it may have missed one");
        assert!(stored(&log, log.mark(), "http://unrelated/", &[]));
    }
}
