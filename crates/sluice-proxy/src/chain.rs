//! Runs the modules' phase callbacks for one transaction, in configured order.

use sluice_module::{Flow, LocalResponse, Module, Txn as ModuleTxn, TxnInfo};
use std::sync::Arc;

struct Slot {
    state: Box<dyn ModuleTxn>,
    /// False after the module answered [`Flow::Done`].
    active: bool,
}

/// The per-transaction states of the modules taking part, in order. Dropping the chain drops
/// each state exactly once.
#[derive(Default)]
pub struct ModuleChain {
    slots: Vec<Slot>,
}

impl std::fmt::Debug for ModuleChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleChain").field("modules", &self.slots.len()).finish()
    }
}

impl ModuleChain {
    /// Asks every module for its state; modules answering `None` sit the transaction out.
    pub fn new(modules: &[Arc<dyn Module>], info: &TxnInfo) -> Self {
        let slots = modules.iter().filter_map(|m| m.new_txn(info)).map(|state| Slot { state, active: true }).collect();
        Self { slots }
    }

    /// True when no module takes part (the common fast path).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Runs a request phase: stops at the first module that answers locally.
    pub fn request_phase(&mut self, mut call: impl FnMut(&mut dyn ModuleTxn) -> Flow) -> Option<LocalResponse> {
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            match call(slot.state.as_mut()) {
                Flow::Continue => {}
                Flow::Done => slot.active = false,
                Flow::Respond(response) => return Some(response),
            }
        }
        None
    }

    /// Runs a response phase, where a local answer is not possible: `Respond` is ignored.
    pub fn response_phase(&mut self, mut call: impl FnMut(&mut dyn ModuleTxn) -> Flow) {
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            match call(slot.state.as_mut()) {
                Flow::Continue => {}
                Flow::Done => slot.active = false,
                Flow::Respond(_) => tracing::warn!("a module answered Respond in a response phase; ignored"),
            }
        }
    }

    /// Runs a notification (no verdict) on every module that is still active.
    pub fn notify(&mut self, mut call: impl FnMut(&mut dyn ModuleTxn)) {
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            call(slot.state.as_mut());
        }
    }
}
