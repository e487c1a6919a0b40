//! The limit on open client connections (`client.max_connections`), over all listeners, as
//! HAProxy's `maxconn` and nginx's `worker_connections`: past it, the listeners stop
//! accepting, so new connections wait in the kernel's listen backlog instead of taking a
//! descriptor each until the process has none left for its origins and disk files.
//!
//! Each listener accepts a connection, then waits for a free slot before serving it and
//! accepting the next; so the connections waiting are at most one per listener, and a slot
//! that frees goes to the listener that has waited longest (the semaphore is fair). A slot
//! is held by the connection's task until it ends, TLS handshake, tunnels and protocol
//! switches included.
//!
//! The same type holds the slots of `upstream.max_connections`, the limit on open origin
//! connections (`crate::upstream`), whose default is the same automatic number: an HTTP/2
//! client connection may need many origin connections at once, one per stream.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A held slot: the connection counts against the limit until this is dropped.
pub(crate) type Slot = OwnedSemaphorePermit;

/// The limit and its slots; shared by every generation (the limit itself reloads).
#[derive(Debug)]
pub struct ConnectionLimit {
    slots: Arc<Semaphore>,
    /// The limit in force.
    limit: AtomicUsize,
    /// Connections that had to wait for a slot.
    waits: AtomicU64,
    /// When a wait was last logged (seconds on the process's monotonic clock; 0: never).
    logged_at: AtomicU64,
}

impl ConnectionLimit {
    /// `configured` slots; 0: automatic, half of what the process's limit on open
    /// descriptors leaves after [`RESERVED`] (the other half for origin connections).
    pub fn new(configured: usize) -> Self {
        let limit = effective(configured);
        Self {
            slots: Arc::new(Semaphore::new(limit)),
            limit: AtomicUsize::new(limit),
            waits: 0.into(),
            logged_at: 0.into(),
        }
    }

    /// The limit in force.
    pub fn limit(&self) -> usize {
        self.limit.load(Relaxed)
    }

    /// Connections that had to wait for a slot since start.
    pub fn waits(&self) -> u64 {
        self.waits.load(Relaxed)
    }

    /// Its Prometheus metrics: the limit and the waits.
    pub(crate) fn prometheus(&self) -> String {
        format!(
            "# HELP sluice_client_connections_limit Most client connections open at once (client.max_connections).\n\
             # TYPE sluice_client_connections_limit gauge\nsluice_client_connections_limit {}\n\
             # HELP sluice_client_connection_waits_total Accepted connections that waited for a slot under the limit.\n\
             # TYPE sluice_client_connection_waits_total counter\nsluice_client_connection_waits_total {}\n",
            self.limit(),
            self.waits()
        )
    }

    /// A slot if one is free now.
    pub(crate) fn try_take(&self) -> Option<Slot> {
        Arc::clone(&self.slots).try_acquire_owned().ok()
    }

    /// Waits for a slot (counted and, at most once a minute, logged).
    pub(crate) async fn take(&self) -> Slot {
        self.note_wait(|limit| {
            format!("client.max_connections ({limit}) reached: new connections wait in the listen backlog")
        });
        self.take_quietly().await
    }

    /// Counts a wait for a slot and, at most once a minute, logs `message` (given the limit)
    /// as a warning.
    pub(crate) fn note_wait(&self, message: impl FnOnce(usize) -> String) {
        self.waits.fetch_add(1, Relaxed);
        let now = seconds_since_start();
        let last = self.logged_at.load(Relaxed);
        if (last == 0 || now >= last + 60)
            && self.logged_at.compare_exchange(last, now.max(1), Relaxed, Relaxed).is_ok()
        {
            tracing::warn!("{}", message(self.limit()));
        }
    }

    /// Waits for a slot, neither counted nor logged (the caller does).
    pub(crate) async fn take_quietly(&self) -> Slot {
        Arc::clone(&self.slots).acquire_owned().await.expect("the semaphore is never closed")
    }

    /// Makes `configured` (0: automatic, as in [`Self::new`]) the limit. A higher one frees
    /// slots at once; a lower one takes effect as open connections close (none is closed
    /// for it).
    pub(crate) fn set(&self, configured: usize) {
        let limit = effective(configured);
        let was = self.limit.swap(limit, Relaxed);
        if limit > was {
            self.slots.add_permits(limit - was);
        } else if limit < was {
            // Free slots go at once; for the rest, queued as any waiting listener (the
            // semaphore is fair), the slots of the next connections to close.
            let excess = (was - limit) - self.slots.forget_permits(was - limit);
            if excess > 0 {
                let slots = Arc::clone(&self.slots);
                tokio::spawn(async move {
                    if let Ok(retired) = slots.acquire_many_owned(excess as u32).await {
                        retired.forget();
                    }
                });
            }
        }
    }
}

/// Descriptors the automatic limit leaves aside for what is neither a client nor an origin
/// connection: listeners, the admin API, log and disk files, the runtime's own.
pub const RESERVED: usize = 64;

/// The number of slots for a configured limit (0: automatic).
fn effective(configured: usize) -> usize {
    let limit = if configured > 0 { configured } else { descriptor_limit().saturating_sub(RESERVED) / 2 };
    limit.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize))
}

/// The soft limit on the process's open descriptors (`sluice serve` raises it to the hard
/// limit first).
fn descriptor_limit() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    limit.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn seconds_since_start() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_is_half_the_descriptor_limit_less_a_reserve() {
        assert_eq!(ConnectionLimit::new(0).limit(), ((descriptor_limit() - RESERVED) / 2).max(1));
        assert_eq!(ConnectionLimit::new(7).limit(), 7);
    }

    #[tokio::test]
    async fn slots_are_given_back_and_the_limit_moves_both_ways() {
        let limit = ConnectionLimit::new(2);
        let (a, b) = (limit.try_take().unwrap(), limit.try_take().unwrap());
        assert!(limit.try_take().is_none(), "both slots held");
        drop(a);
        let c = limit.try_take().expect("a slot given back is free again");

        limit.set(3);
        let d = limit.try_take().expect("a higher limit frees a slot at once");
        assert!(limit.try_take().is_none());

        limit.set(1);
        drop((b, c));
        assert_eq!(limit.limit(), 1);
        // Two connections closed; the lower limit retires both slots: none is free while
        // `d` stays open.
        tokio::task::yield_now().await;
        assert!(limit.try_take().is_none(), "over the new limit: no slot");
        drop(d);
        let e = limit.try_take().expect("under it again");
        assert!(limit.try_take().is_none());
        drop(e);
    }
}
