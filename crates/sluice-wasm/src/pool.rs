//! The instances of one plugin version, each in a slot with its crash history.
//!
//! A transaction's context lives in one instance, so the transaction sticks to its slot. A
//! slot whose instance faulted drops it, bumps its generation (contexts of the lost instance
//! notice the change and fail) and waits out an exponential backoff before the next
//! transaction that picks it starts a new instance. A transaction that completes cleanly
//! resets the slot's run of crashes.

use crate::abi::LogLevel;
use crate::compiled::CompiledPlugin;
use crate::config::WasmConfig;
use crate::shared::Shared;
use crate::stats::Stats;
use crate::vm::{Fault, PluginVm};
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One instance slot.
pub(crate) struct SlotState {
    pub vm: Option<PluginVm>,
    /// Bumped whenever the slot loses its instance.
    pub generation: u64,
    /// Crashes since the last cleanly completed transaction.
    consecutive: u32,
    /// No new instance before this.
    retry_at: Option<Instant>,
}

/// What starting an instance needs.
pub(crate) struct Blueprint {
    pub compiled: CompiledPlugin,
    pub config: WasmConfig,
    pub shared: Arc<Shared>,
}

impl Blueprint {
    fn start(&self) -> Result<PluginVm, Fault> {
        let limits = &self.config.limits;
        PluginVm::start(
            &self.compiled,
            Arc::clone(&self.shared),
            limits.memory_bytes(),
            limits.deadline(),
            limits.start_deadline(),
        )
    }
}

impl SlotState {
    /// The slot's instance, starting one if it has none and its backoff is over.
    pub(crate) fn vm(&mut self, blueprint: &Blueprint) -> Option<&mut PluginVm> {
        if self.vm.is_none() {
            if self.retry_at.is_some_and(|at| Instant::now() < at) {
                Stats::bump(&blueprint.shared.stats.backoff_waits);
                return None;
            }
            self.start(blueprint).ok()?;
        }
        self.vm.as_mut()
    }

    /// Starts an instance now if the slot has none (ignoring any backoff); a failure is
    /// logged, counted and backed off.
    pub(crate) fn start(&mut self, blueprint: &Blueprint) -> Result<(), Fault> {
        if self.vm.is_some() {
            return Ok(());
        }
        let stats = &blueprint.shared.stats;
        match blueprint.start() {
            Ok(vm) => {
                Stats::bump(&stats.instances_started);
                self.retry_at = None;
                self.vm = Some(vm);
                Ok(())
            }
            Err(fault) => {
                Stats::bump(&stats.start_failures);
                blueprint.shared.log(LogLevel::Error, &format!("instance failed to start: {fault}"));
                self.back_off(blueprint);
                Err(fault)
            }
        }
    }

    /// Drops the instance after `fault` and schedules the next start.
    pub(crate) fn crash(&mut self, blueprint: &Blueprint, fault: &Fault) {
        let stats = &blueprint.shared.stats;
        Stats::bump(&stats.crashes);
        Stats::bump(match fault {
            Fault::Deadline => &stats.deadline_kills,
            Fault::Memory => &stats.memory_kills,
            Fault::Trap(_) => &stats.traps,
        });
        self.vm = None;
        self.generation += 1;
        self.back_off(blueprint);
        let wait = self.retry_at.map(|at| at.saturating_duration_since(Instant::now())).unwrap_or_default();
        blueprint.shared.log(
            LogLevel::Error,
            &format!("instance discarded ({fault}); crash {} in a row, next start in {wait:?}", self.consecutive),
        );
    }

    fn back_off(&mut self, blueprint: &Blueprint) {
        self.consecutive = self.consecutive.saturating_add(1);
        self.retry_at = Some(Instant::now() + blueprint.config.limits.backoff(self.consecutive));
    }

    /// A transaction on this slot completed without a fault.
    pub(crate) fn healthy(&mut self) {
        self.consecutive = 0;
    }
}

/// The slots of one plugin version.
pub(crate) struct Pool {
    slots: Box<[Mutex<SlotState>]>,
    next: AtomicUsize,
}

impl Pool {
    /// `count` empty slots.
    pub(crate) fn new(count: usize) -> Self {
        let slots = (0..count.max(1))
            .map(|_| Mutex::new(SlotState { vm: None, generation: 0, consecutive: 0, retry_at: None }))
            .collect();
        Self { slots, next: AtomicUsize::new(0) }
    }

    /// Slot `index`, locked.
    pub(crate) fn lock(&self, index: usize) -> MutexGuard<'_, SlotState> {
        self.slots[index % self.slots.len()].lock()
    }

    /// Every slot, locked one after the other.
    pub(crate) fn each(&self, mut f: impl FnMut(&mut SlotState)) {
        for slot in self.slots.iter() {
            f(&mut slot.lock());
        }
    }

    /// Runs `f` on a slot with a usable instance: first any slot that is free right now
    /// (round robin), else waiting for each in turn. `None` when no slot has or can start an
    /// instance.
    pub(crate) fn with_vm<T>(&self, blueprint: &Blueprint, mut f: impl FnMut(usize, &mut SlotState) -> T) -> Option<T> {
        let count = self.slots.len();
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        for wait in [false, true] {
            for step in 0..count {
                let index = (first + step) % count;
                let slot = &self.slots[index];
                let mut guard = if wait {
                    slot.lock()
                } else {
                    match slot.try_lock() {
                        Some(guard) => guard,
                        None => continue,
                    }
                };
                if guard.vm(blueprint).is_some() {
                    return Some(f(index, &mut guard));
                }
            }
        }
        None
    }
}
