//! Counters of one plugin version, for the admin API, logs and tests.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (relaxed atomics; read them with [`Stats::snapshot`]).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub instances_started: AtomicU64,
    pub start_failures: AtomicU64,
    pub crashes: AtomicU64,
    pub deadline_kills: AtomicU64,
    pub memory_kills: AtomicU64,
    pub traps: AtomicU64,
    pub backoff_waits: AtomicU64,
    pub contexts_created: AtomicU64,
    pub contexts_deleted: AtomicU64,
    pub failed_transactions: AtomicU64,
    pub unavailable: AtomicU64,
    pub queue_items_dropped: AtomicU64,
}

/// A copy of a plugin version's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WasmStats {
    /// Plugin version (counts loads of the same name in one registry, from 1).
    pub version: u64,
    /// Instances created and started (`proxy_on_vm_start` and `proxy_on_configure` passed).
    pub instances_started: u64,
    /// Instances that failed to start.
    pub start_failures: u64,
    /// Instances lost to a fault in a callback (the three kinds below).
    pub crashes: u64,
    /// ... because a callback ran past its deadline.
    pub deadline_kills: u64,
    /// ... because the instance's memory would have grown past the limit.
    pub memory_kills: u64,
    /// ... because of any other trap (`unreachable`, a panic, a bad memory access, ...).
    pub traps: u64,
    /// Times an instance slot was found waiting out its crash backoff.
    pub backoff_waits: u64,
    /// HTTP contexts created (`proxy_on_context_create`) and deleted (`proxy_on_delete`).
    pub contexts_created: u64,
    pub contexts_deleted: u64,
    /// Transactions failed open or closed because of the plugin.
    pub failed_transactions: u64,
    /// Transactions that found no usable instance (all waiting out a backoff).
    pub unavailable: u64,
    /// Shared-queue items dropped, oldest first, from queues over their limits.
    pub queue_items_dropped: u64,
}

impl Stats {
    /// Adds one to `counter`.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The current values.
    pub(crate) fn snapshot(&self, version: u64) -> WasmStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WasmStats {
            version,
            instances_started: get(&self.instances_started),
            start_failures: get(&self.start_failures),
            crashes: get(&self.crashes),
            deadline_kills: get(&self.deadline_kills),
            memory_kills: get(&self.memory_kills),
            traps: get(&self.traps),
            backoff_waits: get(&self.backoff_waits),
            contexts_created: get(&self.contexts_created),
            contexts_deleted: get(&self.contexts_deleted),
            failed_transactions: get(&self.failed_transactions),
            unavailable: get(&self.unavailable),
            queue_items_dropped: get(&self.queue_items_dropped),
        }
    }
}
