//! HTTP/2 clients that cancel request after request (rapid reset, CVE-2023-44487, in its
//! "reset after accept" form): the h2 crate counts only streams reset before the
//! application took them, so a client that resets each stream a few milliseconds after
//! sending it (after the proxy began to serve it, an origin request on its way) is never
//! stopped by it, and can start origin requests as fast as it can write frames.
//!
//! Each HTTP/2 request's service future holds a [`Tally`], which tells the connection's
//! [`Cancels`] whether it completed (produced its response head) or was dropped before that: the client reset the stream, or went away. Past [`ALLOWANCE`] cancelled
//! requests, plus one for every two completed ones, the connection is closed: `GOAWAY`, then,
//! after [`GRACE`], dropped with whatever is still open (`crate::server::serve`). A browser
//! cancels some navigations and prefetches, never more than a hundred in a row without
//! completing twice as many.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Cancelled requests a connection may have before completed ones count.
pub(crate) const ALLOWANCE: u64 = 100;

/// How long a connection closed for its cancellations has to end after its `GOAWAY` before
/// it is dropped.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

/// One connection's tally.
#[derive(Debug, Default)]
pub(crate) struct Cancels {
    cancelled: AtomicU64,
    completed: AtomicU64,
    /// Fired when the cancellations go past the allowance.
    pub(crate) tripped: Notify,
}

impl Cancels {
    fn completed(&self) {
        self.completed.fetch_add(1, Relaxed);
    }

    fn cancelled(&self) {
        let cancelled = self.cancelled.fetch_add(1, Relaxed) + 1;
        // Every time past it (one permit is stored at most): the connection listens once.
        if over(cancelled, self.completed.load(Relaxed)) {
            self.tripped.notify_one();
        }
    }

    /// Requests cancelled so far.
    pub(crate) fn cancelled_count(&self) -> u64 {
        self.cancelled.load(Relaxed)
    }
}

/// Whether `cancelled` requests are too many beside `completed` ones.
fn over(cancelled: u64, completed: u64) -> bool {
    cancelled > ALLOWANCE + completed / 2
}

/// One HTTP/2 request, counted in its connection's [`Cancels`] when it ends: completed once
/// its response head is produced ([`Tally::completed`]), cancelled when dropped before (the
/// client reset the stream, or went away). Held inside the service future
/// (`crate::service::handle`), so that the future is not wrapped: hyper builds it in place.
pub(crate) struct Tally(Option<Arc<Cancels>>);

impl Tally {
    pub(crate) fn new(cancels: &Arc<Cancels>) -> Self {
        Self(Some(Arc::clone(cancels)))
    }

    /// The request produced its response head.
    pub(crate) fn completed(mut self) {
        if let Some(cancels) = self.0.take() {
            cancels.completed();
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if let Some(cancels) = self.0.take() {
            cancels.cancelled();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test]
    async fn trips_once_past_the_allowance_and_completions_raise_it() {
        let tally = Arc::new(Cancels::default());
        for _ in 0..40 {
            Tally::new(&tally).completed();
        }
        // 100 + 40 / 2 = 120 cancellations allowed.
        for _ in 0..120 {
            drop(Tally::new(&tally));
        }
        let tripped = tally.tripped.notified();
        tokio::pin!(tripped);
        assert!(tripped.as_mut().now_or_never().is_none(), "120 are allowed");
        drop(Tally::new(&tally));
        assert!(tripped.as_mut().now_or_never().is_some(), "the 121st trips");
        assert_eq!(tally.cancelled_count(), 121);
    }
}
