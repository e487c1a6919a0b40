//! The instances of one plugin version, each in a slot with its crash history.
//!
//! A transaction's context lives in one instance, so the transaction sticks to its slot. A
//! slot whose instance faulted drops it and bumps its generation (contexts of the lost
//! instance notice the change and fail). A background thread (`sluice-wasm-restart`) starts a
//! new instance for the slot once an exponential backoff is over, so requests do not wait
//! for plugin start-up; meanwhile transactions go to the other slots. Only when no slot has
//! a live instance does a transaction start one itself (if a backoff is over). A transaction
//! that completes cleanly ends the slot's run of crashes.

use crate::abi::LogLevel;
use crate::compiled::CompiledPlugin;
use crate::config::WasmConfig;
use crate::shared::Shared;
use crate::stats::Stats;
use crate::vm::{Fault, PluginVm};
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What starting an instance needs.
pub(crate) struct Blueprint {
    pub compiled: CompiledPlugin,
    pub config: WasmConfig,
    pub shared: Arc<Shared>,
}

impl Blueprint {
    fn start(&self) -> Result<PluginVm, Fault> {
        let limits = &self.config.limits;
        let started = PluginVm::start(
            &self.compiled,
            Arc::clone(&self.shared),
            limits.memory_bytes(),
            limits.deadline(),
            limits.start_deadline(),
        );
        if let Err(fault) = &started {
            Stats::bump(&self.shared.stats.start_failures);
            self.shared.log(LogLevel::Error, &format!("instance failed to start: {fault}"));
        }
        started
    }
}

/// One plugin version: how to start instances, and the slots holding them. Transactions
/// keep it alive after a reload or unload.
pub(crate) struct Core {
    pub blueprint: Blueprint,
    pub pool: Pool,
    /// No longer the current version: crashed instances are not restarted.
    pub retired: AtomicBool,
}

impl Core {
    pub(crate) fn shared(&self) -> &Shared {
        &self.blueprint.shared
    }

    pub(crate) fn config(&self) -> &WasmConfig {
        &self.blueprint.config
    }

    /// Whether transactions keep the request head for the callbacks after the request
    /// headers callback: configured so, and the plugin can read it.
    pub(crate) fn keeps_request(&self) -> bool {
        self.blueprint.config.request_headers_in_response && self.blueprint.compiled.reads_heads()
    }

    /// Whether transactions keep the response head for the callbacks after the response
    /// headers callback: configured so, and the plugin can read it.
    pub(crate) fn keeps_response(&self) -> bool {
        self.blueprint.config.response_headers_in_body && self.blueprint.compiled.reads_heads()
    }
}

/// One instance slot.
pub(crate) struct SlotState {
    pub vm: Option<PluginVm>,
    /// Bumped whenever the slot loses its instance.
    pub generation: u64,
    /// Crashes since the last cleanly completed transaction.
    consecutive: u32,
    /// No new instance before this.
    retry_at: Option<Instant>,
    /// A restart thread is waiting to start this slot's instance.
    restarting: bool,
}

impl SlotState {
    /// Starts an instance now if the slot has none, backoff or not (loading). A failure is
    /// logged, counted and backed off.
    pub(crate) fn start(&mut self, blueprint: &Blueprint) -> Result<(), Fault> {
        if self.vm.is_some() {
            return Ok(());
        }
        match blueprint.start() {
            Ok(vm) => {
                self.install(blueprint, vm);
                Ok(())
            }
            Err(fault) => {
                self.back_off(blueprint);
                Err(fault)
            }
        }
    }

    /// Puts a started instance in the slot, unless it got one meanwhile.
    fn install(&mut self, blueprint: &Blueprint, vm: PluginVm) {
        if self.vm.is_none() {
            Stats::bump(&blueprint.shared.stats.instances_started);
            self.retry_at = None;
            self.vm = Some(vm);
        }
    }

    /// The slot's instance, starting one here if it has none and its backoff is over (the
    /// fallback when no slot has a live instance).
    fn vm_or_start(&mut self, blueprint: &Blueprint) -> Option<&mut PluginVm> {
        if self.vm.is_none() {
            if self.retry_at.is_some_and(|at| Instant::now() < at) {
                Stats::bump(&blueprint.shared.stats.backoff_waits);
                return None;
            }
            self.start(blueprint).ok()?;
        }
        self.vm.as_mut()
    }

    /// Drops the slot's instance after `fault` and schedules a restart after the backoff.
    pub(crate) fn crash(&mut self, core: &Arc<Core>, index: usize, fault: &Fault) {
        let blueprint = &core.blueprint;
        let stats = &blueprint.shared.stats;
        Stats::bump(&stats.crashes);
        Stats::bump(match fault {
            Fault::Deadline => &stats.deadline_kills,
            Fault::Memory => &stats.memory_kills,
            Fault::Trap(_) | Fault::Refused(_) => &stats.traps,
        });
        self.vm = None;
        self.generation += 1;
        self.back_off(blueprint);
        let wait = self.retry_at.map(|at| at.saturating_duration_since(Instant::now())).unwrap_or_default();
        blueprint.shared.log(
            LogLevel::Error,
            &format!("instance discarded ({fault}); crash {} in a row, restart in {wait:?}", self.consecutive),
        );
        if !self.restarting {
            let core = Arc::clone(core);
            let spawned =
                std::thread::Builder::new().name("sluice-wasm-restart".into()).spawn(move || restart(&core, index));
            // Without a thread the fallback in `Pool::with_vm` restarts the slot.
            self.restarting = spawned.is_ok();
        }
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

/// The restart thread of slot `index`: waits out the backoff, starts an instance (without
/// holding the slot) and installs it; retries with a longer backoff if it fails to start.
fn restart(core: &Core, index: usize) {
    loop {
        let due = {
            let mut slot = core.pool.lock(index);
            if slot.vm.is_some() || core.retired.load(Ordering::Relaxed) {
                slot.restarting = false;
                return;
            }
            slot.retry_at
        };
        if let Some(due) = due {
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        if core.retired.load(Ordering::Relaxed) {
            core.pool.lock(index).restarting = false;
            return;
        }
        let started = core.blueprint.start();
        let mut slot = core.pool.lock(index);
        match started {
            Ok(vm) => {
                slot.install(&core.blueprint, vm);
                slot.restarting = false;
                return;
            }
            Err(_) if slot.vm.is_some() => {
                slot.restarting = false;
                return;
            }
            Err(_) => slot.back_off(&core.blueprint),
        }
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
            .map(|_| {
                Mutex::new(SlotState { vm: None, generation: 0, consecutive: 0, retry_at: None, restarting: false })
            })
            .collect();
        Self { slots, next: AtomicUsize::new(0) }
    }

    /// Slot `index`, locked.
    pub(crate) fn lock(&self, index: usize) -> MutexGuard<'_, SlotState> {
        self.slots[index % self.slots.len()].lock()
    }

    /// Every slot, locked one after the other.
    pub(crate) fn each(&self, mut f: impl FnMut(usize, &mut SlotState)) {
        for (index, slot) in self.slots.iter().enumerate() {
            f(index, &mut slot.lock());
        }
    }

    /// Runs `f` on a slot with a live instance: first one that is free right now (round
    /// robin), else the first that frees up. When no slot has a live instance, a slot whose
    /// backoff is over starts one here. `None` when none can.
    pub(crate) fn with_vm<T>(&self, blueprint: &Blueprint, mut f: impl FnMut(usize, &mut SlotState) -> T) -> Option<T> {
        let count = self.slots.len();
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        let order = (0..count).map(|step| (first + step) % count);
        for index in order.clone() {
            if let Some(mut slot) = self.slots[index].try_lock() {
                if slot.vm.is_some() {
                    return Some(f(index, &mut slot));
                }
            }
        }
        for index in order.clone() {
            let mut slot = self.slots[index].lock();
            if slot.vm.is_some() {
                return Some(f(index, &mut slot));
            }
        }
        for index in order {
            let mut slot = self.slots[index].lock();
            if slot.vm_or_start(blueprint).is_some() {
                return Some(f(index, &mut slot));
            }
        }
        None
    }
}
