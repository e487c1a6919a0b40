//! The module chain new transactions start with, swappable while the proxy runs.
//!
//! Every transaction takes a snapshot of the list when it starts (one atomic load, no lock,
//! no reference-count traffic on the shared list: `arc-swap`'s thread-local debts) and asks
//! each module for its state from it. Its states hold their modules (`Arc<dyn Module>`), so a
//! transaction finishes on the modules it started with whatever happens to the list
//! afterwards; transactions that start after a [`ModuleList::store`] see the new list.

use crate::chain::LoadedModule;
use arc_swap::ArcSwap;
use std::sync::Arc;
use tokio::sync::watch;

/// A shared handle to the proxy's module list; clones refer to the same list.
#[derive(Clone)]
pub struct ModuleList {
    current: Arc<ArcSwap<Vec<LoadedModule>>>,
    /// Counts stores, so that timers can follow the list.
    generation: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for ModuleList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.snapshot().iter()).finish()
    }
}

impl Default for ModuleList {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl From<Vec<LoadedModule>> for ModuleList {
    fn from(modules: Vec<LoadedModule>) -> Self {
        Self::new(modules)
    }
}

impl ModuleList {
    /// A list holding `modules`, in chain order.
    pub fn new(modules: Vec<LoadedModule>) -> Self {
        Self { current: Arc::new(ArcSwap::from_pointee(modules)), generation: Arc::new(watch::channel(0).0) }
    }

    /// The list for a transaction that starts now: cheap, for the hot path. Hold the guard
    /// only while the chain is being set up (each thread has a few such guards before
    /// loads fall back to a reference-count increment); use [`ModuleList::snapshot`] to keep
    /// the list longer.
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<Vec<LoadedModule>>> {
        self.current.load()
    }

    /// The current list, to keep.
    pub fn snapshot(&self) -> Arc<Vec<LoadedModule>> {
        self.current.load_full()
    }

    /// The module named `name` in the current list.
    pub fn find(&self, name: &str) -> Option<LoadedModule> {
        self.current.load().iter().find(|m| m.module.name() == name).cloned()
    }

    /// Replaces the list: transactions that start from now on use `modules`; those under way
    /// keep theirs. Wakes [`ModuleList::subscribe`]rs.
    pub fn store(&self, modules: Vec<LoadedModule>) {
        self.current.store(Arc::new(modules));
        self.generation.send_modify(|g| *g += 1);
    }

    /// A receiver that sees a change after every [`ModuleList::store`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_module::{FailurePolicy, Module, Txn, TxnInfo};

    struct Named(&'static str);

    impl Module for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn new_txn(&self, _info: &TxnInfo) -> Option<Box<dyn Txn>> {
            None
        }
    }

    fn loaded(name: &'static str) -> LoadedModule {
        LoadedModule { module: Arc::new(Named(name)), on_error: FailurePolicy::Open }
    }

    #[test]
    fn a_snapshot_outlives_a_store_and_new_loads_see_the_new_list() {
        let list = ModuleList::new(vec![loaded("a")]);
        let changes = list.subscribe();
        let before = list.snapshot();
        list.store(vec![loaded("b"), loaded("c")]);
        assert!(changes.has_changed().unwrap());
        assert_eq!(before.iter().map(|m| m.module.name()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(list.load().iter().map(|m| m.module.name()).collect::<Vec<_>>(), ["b", "c"]);
        assert!(list.find("c").is_some() && list.find("a").is_none());
        assert!(list.clone().find("b").is_some(), "clones share the list");
    }
}
