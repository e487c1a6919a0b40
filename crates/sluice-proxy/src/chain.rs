//! Runs the modules' phase callbacks for one transaction, in configured order, and contains
//! their failures: a panic, a missed `Defer` deadline or an oversized `Buffer` fails the
//! transaction open (the module is skipped from then on) or closed (an error), as configured.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use sluice_module::{BodyChunk, BodyEdits, FailurePolicy, Flow, LocalResponse, Module, Txn as ModuleTxn, TxnInfo};
use smallvec::SmallVec;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// A configured module: the module and what its failure does to a transaction.
#[derive(Clone)]
pub struct LoadedModule {
    pub module: Arc<dyn Module>,
    pub on_error: FailurePolicy,
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModule").field("name", &self.module.name()).field("on_error", &self.on_error).finish()
    }
}

/// A module failed a transaction that it guards closed. One pointer wide: failures are
/// rare, and a small error keeps the `Result` of every phase cheap to return.
#[derive(Debug, Clone, thiserror::Error)]
#[error("module {} failed: {}", .0.module, .0.what)]
pub struct ModuleFailure(Box<FailureDetail>);

/// Which module failed, and how.
#[derive(Debug, Clone)]
struct FailureDetail {
    module: String,
    what: String,
}

struct Slot {
    /// Dropped by `Slot`'s `Drop`, which contains a panic in the module's drop.
    state: Box<dyn ModuleTxn>,
    /// The module (for its name in failure reports; cloning the `Arc` costs no allocation).
    module: Arc<dyn Module>,
    on_error: FailurePolicy,
    /// False after the module answered `Done` or failed open.
    active: bool,
    /// The module answered `Buffer` at `req_headers` (the request body is held for it).
    buffers_request: bool,
    /// The module answered `Buffer` at `client_resp_headers` (the response is held for it).
    buffers_response: bool,
    /// The module's answer to `edits_body`, once asked: it keeps its answer for the whole
    /// transaction, so the host asks once (it fits in the slot's padding).
    edits: Option<BodyEdits>,
}

/// The verdicts a header phase honours besides `Continue`, `Done` and `Defer`; the others
/// are logged and treated as `Continue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Honours {
    /// Nothing more (`origin_resp_headers`).
    Nothing,
    /// `Respond`: a request phase (`cache_lookup`, `resolve`, `req_out`, `req_body`).
    Respond,
    /// `Respond`, and `Buffer` of the request body (`req_headers`).
    RespondOrBufferRequest,
    /// `Respond` (replacing the response before anything is sent), and `Buffer` of the
    /// response (`client_resp_headers`).
    RespondOrBufferResponse,
}

/// Which message a module asked to buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferSide {
    /// The request body, asked for at `req_headers`.
    Request,
    /// The response, asked for at `client_resp_headers`.
    Response,
}

/// What a header phase asks of the host, besides going on.
#[derive(Debug, Default)]
pub struct PhaseOutcome {
    /// A module answered locally (request phases only). Boxed: local answers are rare, and
    /// a small outcome keeps every phase's result cheap to move.
    pub respond: Option<Box<LocalResponse>>,
    /// Some module asked to buffer the body, at most this many bytes.
    pub buffer: Option<usize>,
}

impl PhaseOutcome {
    /// Folds one module's step in; true when the phase ends here (a local answer).
    fn record(&mut self, step: Step) -> bool {
        match step {
            Step::Go => false,
            Step::Respond(response) => {
                self.respond = Some(Box::new(response));
                true
            }
            Step::Buffer(max) => {
                self.buffer = Some(self.buffer.map_or(max, |m| m.min(max)));
                false
            }
        }
    }
}

/// The slots of the modules taking part. A few fit inline, so that setting up a chain costs
/// one allocation (its shared cell), not two.
type Slots = SmallVec<[Slot; 2]>;

/// The per-transaction states of the modules taking part, in order. Dropping the chain drops
/// each state exactly once (the last [`SharedChain`] handle to go drops it).
#[derive(Default)]
pub struct ModuleChain {
    slots: Slots,
    /// A module failed open in a body phase: the body it was editing went on unedited from
    /// there, so a fill must not store it ([`SharedChain::failed_open_in_a_body`]).
    failed_open_in_a_body: bool,
}

impl std::fmt::Debug for ModuleChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleChain").field("modules", &self.slots.len()).finish()
    }
}

/// How far a header phase got without waiting. Two words: returned in registers.
enum Progress {
    /// Every active module was called, or one answered locally.
    Finished,
    /// A module deferred; the modules after it wait for its work.
    Deferred(Box<Deferred>),
    /// A module that guards the transaction closed failed.
    Failed(ModuleFailure),
}

/// One module's deferred work in a header phase.
struct Deferred {
    index: usize,
    work: BoxFuture<'static, Flow>,
    deadline: std::time::Duration,
}

/// A module's verdict as it leaves the panic guard: two words, so that the common verdicts
/// (`Continue`, `Done`) cost neither a copy of the large [`Flow`] nor its drop glue. The
/// rarer verdicts, which carry a response, a limit or a future, are boxed.
enum Verdict {
    Continue,
    Done,
    Other(Box<Flow>),
    /// The call panicked.
    Panicked,
}

/// Calls `call`, containing a panic, and sorts its verdict.
#[inline(always)]
fn guarded(call: impl FnOnce() -> Flow) -> Verdict {
    let verdict = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let flow = call();
        if let Flow::Continue = flow {
            std::mem::forget(flow); // owns nothing
            return Verdict::Continue;
        }
        if let Flow::Done = flow {
            std::mem::forget(flow); // owns nothing
            return Verdict::Done;
        }
        Verdict::Other(Box::new(flow))
    }));
    verdict.unwrap_or(Verdict::Panicked)
}

/// How a header phase started (see [`SharedChain::start_phase`]).
pub enum PhaseStart<'a> {
    /// The phase is over: every active module answered at once.
    Ready(Result<PhaseOutcome, ModuleFailure>),
    /// A module deferred: the rest of the phase, to await.
    Waiting(BoxFuture<'a, Result<PhaseOutcome, ModuleFailure>>),
}

enum Step {
    Go,
    Respond(LocalResponse),
    Buffer(usize),
}

impl ModuleChain {
    /// Asks every module for its state; modules answering `None` sit the transaction out. A
    /// module that panics in `new_txn` sits it out too; when it guards transactions closed,
    /// its failure is returned as well, and the transaction must fail (the other modules keep
    /// their states, which see the error response and are dropped as usual).
    pub fn new(modules: &[LoadedModule], info: &TxnInfo) -> (Self, Option<ModuleFailure>) {
        let mut slots = Slots::new();
        let mut failure = None;
        for loaded in modules {
            let created = std::panic::catch_unwind(AssertUnwindSafe(|| loaded.module.new_txn(info)));
            match created {
                Ok(Some(state)) => slots.push(Slot {
                    state,
                    module: Arc::clone(&loaded.module),
                    on_error: loaded.on_error,
                    active: true,
                    buffers_request: false,
                    buffers_response: false,
                    edits: None,
                }),
                Ok(None) => {}
                Err(_) => {
                    if let Err(failed) = new_txn_panicked(loaded) {
                        failure.get_or_insert(failed);
                    }
                }
            }
        }
        (Self { slots, failed_open_in_a_body: false }, failure)
    }

    /// True when no module takes part (the common fast path).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Which bodies the active modules may change; `None` when no module is active. Each
    /// module is asked the first time only ([`Slot::edits`]).
    #[inline]
    fn active_edits(&mut self) -> Option<BodyEdits> {
        let mut any_active = false;
        let mut all = BodyEdits::default();
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            any_active = true;
            let edits = *slot.edits.get_or_insert_with(|| slot.state.edits_body());
            all.request |= edits.request;
            all.origin_response |= edits.origin_response;
            all.client_response |= edits.client_response;
        }
        any_active.then_some(all)
    }

    /// Calls the active modules from `start` on, in order, folding their verdicts into
    /// `outcome`, until the phase ends (all called, or a local answer) or one defers.
    /// Inlined into [`SharedChain::start_phase`]: a phase is one call deep.
    #[inline(always)]
    fn run_from(
        &mut self,
        start: usize,
        honours: Honours,
        call: &mut impl FnMut(&mut dyn ModuleTxn, Option<Flow>) -> Flow,
        outcome: &mut PhaseOutcome,
    ) -> Progress {
        // One pass over the slots (the verdicts touch only their own slot), so that the
        // inline-or-spilled check of the storage runs once per phase, not per module.
        for (i, slot) in self.slots.iter_mut().enumerate().skip(start) {
            if !slot.active {
                continue;
            }
            match guarded(|| call(slot.state.as_mut(), None)) {
                Verdict::Continue => {}
                Verdict::Done => slot.active = false,
                Verdict::Other(flow) => match *flow {
                    Flow::Defer { work, deadline } => {
                        return Progress::Deferred(Box::new(Deferred { index: i, work, deadline }))
                    }
                    flow => {
                        if outcome.record(slot.step(flow, honours)) {
                            break;
                        }
                    }
                },
                Verdict::Panicked => {
                    if let Err(failure) = slot.fail("panicked") {
                        return Progress::Failed(failure);
                    }
                }
            }
        }
        Progress::Finished
    }

    /// Runs a body phase on `chunk`: each active module sees the previous one's output. A
    /// module's local answer ends the phase when it `honours` one (`Honours::Respond`: the
    /// streaming `req_body`, whose request the host then abandons); elsewhere it is logged
    /// and ignored. Inlined into [`SharedChain::body_phase`]: a body phase is one call deep.
    #[inline(always)]
    pub fn body_phase(
        &mut self,
        chunk: &mut BodyChunk,
        honours: Honours,
        mut call: impl FnMut(&mut dyn ModuleTxn, &mut BodyChunk) -> Flow,
    ) -> Result<Option<Box<LocalResponse>>, ModuleFailure> {
        for slot in self.slots.iter_mut() {
            if !slot.active {
                continue;
            }
            match guarded(|| call(slot.state.as_mut(), chunk)) {
                Verdict::Continue => {}
                Verdict::Done => slot.active = false,
                Verdict::Other(flow) => {
                    if let Step::Respond(answer) = slot.step(*flow, honours) {
                        return Ok(Some(Box::new(answer)));
                    }
                }
                Verdict::Panicked => {
                    slot.fail("panicked in a body phase")?;
                    self.failed_open_in_a_body = true;
                }
            }
        }
        Ok(None)
    }

    /// Runs a notification (no verdict) on every active module; panics are contained.
    #[inline(always)]
    pub fn notify(&mut self, mut call: impl FnMut(&mut dyn ModuleTxn)) {
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            if std::panic::catch_unwind(AssertUnwindSafe(|| call(slot.state.as_mut()))).is_err() {
                tracing::error!("module {} panicked in a notification", slot.module.name());
                slot.active = false;
            }
        }
    }

    /// Hands module `i` back what the phase works on, with the verdict its deferred work
    /// yielded (`call` with `Some(verdict)`: [`sluice_module::Txn::resumed`]); its answer
    /// (another `Defer` included: awaited in turn), or why the module failed (a panic).
    fn resume(
        &mut self,
        i: usize,
        deferred: Flow,
        call: &mut impl FnMut(&mut dyn ModuleTxn, Option<Flow>) -> Flow,
    ) -> Result<Flow, &'static str> {
        let state = self.slots[i].state.as_mut();
        match guarded(|| call(state, Some(deferred))) {
            Verdict::Continue => Ok(Flow::Continue),
            Verdict::Done => Ok(Flow::Done),
            Verdict::Other(flow) => Ok(*flow),
            Verdict::Panicked => Err("panicked when resumed"),
        }
    }

    /// Applies module `i`'s verdict (see [`Slot::step`]).
    fn step(&mut self, i: usize, flow: Flow, honours: Honours) -> Step {
        self.slots[i].step(flow, honours)
    }

    /// Applies module `i`'s failure policy (see [`Slot::fail`]).
    pub fn fail(&mut self, i: usize, what: &str) -> Result<(), ModuleFailure> {
        self.slots[i].fail(what)
    }

    /// A message held for the modules that asked to buffer it (`side`) outgrew their limit:
    /// applies each such module's failure policy, and only theirs (open: it sits out the rest
    /// of the transaction; closed: the transaction fails). The other modules go on.
    pub fn fail_buffering(&mut self, side: BufferSide, what: &str) -> Result<(), ModuleFailure> {
        let mut result = Ok(());
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            let asked = match side {
                BufferSide::Request => slot.buffers_request,
                BufferSide::Response => slot.buffers_response,
            };
            if asked {
                if let Err(e) = slot.fail(what) {
                    result = Err(e);
                }
            }
        }
        result
    }
}

/// The module chain of one transaction. The transaction owns it alone (no allocation, no
/// lock) until a fetch that fills the cache for it needs it too, to run `origin_resp_body`
/// ([`SharedChain::share`]); from then on both hold it behind a lock that is never held across
/// an await, so a module's methods are never called concurrently. Free when no module takes
/// part.
#[derive(Default)]
pub struct SharedChain {
    chain: Holder,
}

/// Where a chain lives.
#[derive(Default)]
enum Holder {
    /// No module takes part.
    #[default]
    Empty,
    /// Held by one transaction alone.
    Own(ModuleChain),
    /// Held by a transaction and the fetch filling the cache for it.
    Shared(Arc<parking_lot::Mutex<SharedCell>>),
}

/// A chain held by more than one handle.
struct SharedCell {
    chain: ModuleChain,
    /// The transaction's end for the modules (`resp_done`, `log`), parked by the transaction
    /// while a fill still runs `origin_resp_body` ([`SharedChain::end_after_fill`]); run by
    /// whichever handle goes last, just before the states are dropped.
    end: Option<EndOfTxn>,
}

/// See [`SharedCell::end`].
pub type EndOfTxn = Box<dyn FnOnce(&mut ModuleChain) + Send>;

impl std::fmt::Debug for SharedChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedChain").field("modules", &!self.is_empty()).finish()
    }
}

impl SharedChain {
    /// The chain of a new transaction, and the failure of a module that guards it closed and
    /// panicked in `new_txn` (see [`ModuleChain::new`]).
    pub fn new(modules: &[LoadedModule], info: &TxnInfo) -> (Self, Option<ModuleFailure>) {
        if modules.is_empty() {
            return (Self::default(), None);
        }
        let (chain, failure) = ModuleChain::new(modules, info);
        (Self { chain: if chain.is_empty() { Holder::Empty } else { Holder::Own(chain) } }, failure)
    }

    /// True when no module takes part.
    pub fn is_empty(&self) -> bool {
        matches!(self.chain, Holder::Empty)
    }

    /// A handle on the same chain, for a fetch that runs `origin_resp_body` for this
    /// transaction; both handles then share the chain, which is dropped with the last one.
    pub fn share(&mut self) -> SharedChain {
        let shared = match std::mem::take(&mut self.chain) {
            Holder::Empty => return Self::default(),
            Holder::Own(chain) => Arc::new(parking_lot::Mutex::new(SharedCell { chain, end: None })),
            Holder::Shared(shared) => shared,
        };
        self.chain = Holder::Shared(Arc::clone(&shared));
        Self { chain: Holder::Shared(shared) }
    }

    /// Runs `f` on the chain (under the lock when shared); `None` when no module takes part.
    fn with<R>(&mut self, f: impl FnOnce(&mut ModuleChain) -> R) -> Option<R> {
        match &mut self.chain {
            Holder::Empty => None,
            Holder::Own(chain) => Some(f(chain)),
            Holder::Shared(shared) => Some(f(&mut shared.lock().chain)),
        }
    }

    /// Whether a module failed open in a body phase of this transaction: what it had edited
    /// went on, the rest unedited (fit for the client that fails open, not for the cache).
    pub fn failed_open_in_a_body(&mut self) -> bool {
        self.with(|chain| chain.failed_open_in_a_body).unwrap_or(false)
    }

    /// Which bodies the active modules may change; `None` when no module is active any
    /// more (each answered `Done` or failed open), so no body phase needs to run. Each
    /// module is asked once, the first time (see [`sluice_module::Txn::edits_body`]).
    #[inline]
    pub fn edits(&mut self) -> Option<BodyEdits> {
        match &mut self.chain {
            Holder::Empty => None,
            Holder::Own(chain) => chain.active_edits(),
            Holder::Shared(shared) => edits_locked(shared),
        }
    }

    /// Runs a phase that may defer (a header phase, or a body phase on a whole buffered body)
    /// on every active module in order. `call(module, None)` calls the phase method;
    /// `call(module, Some(verdict))` hands the module the phase's subject after its deferred
    /// work ([`sluice_module::Txn::resumed`]). `honours` says which verdicts apply: in
    /// request phases, the first local answer stops the phase.
    ///
    /// Modules that answer at once are called synchronously (under one lock when shared)
    /// before this returns: the common case constructs no future and adds no timer. Only
    /// when a module answers `Defer` is the rest of the phase returned as a (boxed) future,
    /// which awaits the deferred work (without the lock) within its deadline and calls the
    /// modules after it; the caller must await it before the transaction goes on.
    ///
    /// Inlined into each phase's call site (each has its own closure, so its own copy
    /// anyway): a phase whose modules answer at once costs no call of the host's.
    #[inline(always)]
    pub fn start_phase<'a, F>(&'a mut self, honours: Honours, mut call: F) -> PhaseStart<'a>
    where
        F: FnMut(&mut dyn ModuleTxn, Option<Flow>) -> Flow + Send + 'a,
    {
        let mut outcome = PhaseOutcome::default();
        let progress = match &mut self.chain {
            Holder::Empty => Progress::Finished,
            Holder::Own(chain) => chain.run_from(0, honours, &mut call, &mut outcome),
            Holder::Shared(shared) => run_locked(shared, honours, &mut call, &mut outcome),
        };
        match progress {
            Progress::Finished => PhaseStart::Ready(Ok(outcome)),
            Progress::Failed(failure) => PhaseStart::Ready(Err(failure)),
            Progress::Deferred(deferred) => self.waiting(*deferred, honours, call, outcome),
        }
    }

    /// The rest of a phase a module deferred, boxed; out of line, so that the common case
    /// (every module answered at once) keeps a small frame.
    #[cold]
    #[inline(never)]
    fn waiting<'a, F>(
        &'a mut self,
        deferred: Deferred,
        honours: Honours,
        call: F,
        outcome: PhaseOutcome,
    ) -> PhaseStart<'a>
    where
        F: FnMut(&mut dyn ModuleTxn, Option<Flow>) -> Flow + Send + 'a,
    {
        PhaseStart::Waiting(Box::pin(self.wait_and_resume(deferred, honours, call, outcome)))
    }

    /// The waiting path of [`Self::start_phase`]: awaits the deferred work of one module,
    /// hands the module the phase's subject with the work's verdict (`resumed`), applies its
    /// answer (or awaits the next work it defers on), and calls the modules after it, as
    /// often as they defer.
    async fn wait_and_resume(
        &mut self,
        mut deferred: Deferred,
        honours: Honours,
        mut call: impl FnMut(&mut dyn ModuleTxn, Option<Flow>) -> Flow,
        mut outcome: PhaseOutcome,
    ) -> Result<PhaseOutcome, ModuleFailure> {
        loop {
            let Deferred { index, work, deadline } = deferred;
            let flow = match tokio::time::timeout(deadline, AssertUnwindSafe(work).catch_unwind()).await {
                Ok(Ok(Flow::Defer { .. })) => Err("deferred work yielded another Defer".to_owned()),
                Ok(Ok(flow)) => Ok(flow),
                Ok(Err(_)) => Err("deferred work panicked".to_owned()),
                Err(_) => Err(format!("deferred work missed its {deadline:?} deadline")),
            };
            let resumed = self.with(|chain| {
                let flow = flow.and_then(|flow| chain.resume(index, flow, &mut call).map_err(str::to_owned));
                match flow {
                    // More work for the same module: awaited, then resumed again.
                    Ok(Flow::Defer { work, deadline }) => {
                        return Progress::Deferred(Box::new(Deferred { index, work, deadline }));
                    }
                    Ok(flow) => {
                        if outcome.record(chain.step(index, flow, honours)) {
                            return Progress::Finished;
                        }
                    }
                    Err(what) => {
                        if let Err(failure) = chain.fail(index, &what) {
                            return Progress::Failed(failure);
                        }
                    }
                }
                chain.run_from(index + 1, honours, &mut call, &mut outcome)
            });
            match resumed {
                None | Some(Progress::Finished) => return Ok(outcome),
                Some(Progress::Deferred(next)) => deferred = *next,
                Some(Progress::Failed(failure)) => return Err(failure),
            }
        }
    }

    /// Runs a body phase on `chunk` (see [`ModuleChain::body_phase`]).
    #[inline]
    pub fn body_phase(
        &mut self,
        chunk: &mut BodyChunk,
        honours: Honours,
        call: impl FnMut(&mut dyn ModuleTxn, &mut BodyChunk) -> Flow,
    ) -> Result<Option<Box<LocalResponse>>, ModuleFailure> {
        match &mut self.chain {
            Holder::Empty => Ok(None),
            Holder::Own(chain) => chain.body_phase(chunk, honours, call),
            Holder::Shared(shared) => body_phase_locked(shared, chunk, honours, call),
        }
    }

    /// Runs two notifications in one go: `first` on every active module, then `second` on
    /// every module still active (one that panicked in `first` is skipped).
    pub fn notify_both(&mut self, first: impl FnMut(&mut dyn ModuleTxn), second: impl FnMut(&mut dyn ModuleTxn)) {
        match &mut self.chain {
            Holder::Empty => {}
            Holder::Own(chain) => {
                chain.notify(first);
                chain.notify(second);
            }
            Holder::Shared(shared) => {
                let chain = &mut shared.lock().chain;
                chain.notify(first);
                chain.notify(second);
            }
        }
    }

    /// True once the chain was shared: a fill (or a streaming request body) may still hold it.
    pub fn is_shared(&self) -> bool {
        matches!(self.chain, Holder::Shared(_))
    }

    /// Ends the transaction for the modules of a shared chain: `end` (which calls
    /// `resp_done` and `log`) runs when the last handle goes, so that no phase follows it even
    /// when a fill goes on after its client left. Runs at once on a chain not shared.
    pub fn end_after_fill(&mut self, end: EndOfTxn) {
        match &mut self.chain {
            Holder::Empty => {}
            Holder::Own(chain) => end(chain),
            Holder::Shared(shared) => shared.lock().end = Some(end),
        }
    }

    /// See [`ModuleChain::fail_buffering`].
    pub fn fail_buffering(&mut self, side: BufferSide, what: &str) -> Result<(), ModuleFailure> {
        self.with(|chain| chain.fail_buffering(side, what)).unwrap_or(Ok(()))
    }
}

impl Drop for SharedChain {
    /// The last handle of a shared chain runs the transaction's parked end, then drops the
    /// states.
    fn drop(&mut self) {
        // Checked before anything moves: an unshared chain (every hit) drops as it is.
        if !self.is_shared() {
            return;
        }
        if let Holder::Shared(shared) = std::mem::take(&mut self.chain) {
            if let Some(cell) = Arc::into_inner(shared) {
                let SharedCell { mut chain, end } = cell.into_inner();
                if let Some(end) = end {
                    end(&mut chain);
                }
            }
        }
    }
}

/// [`ModuleChain::run_from`] on a shared chain, under its lock; out of line, so that only the
/// common unshared case is inlined.
#[inline(never)]
fn run_locked(
    shared: &parking_lot::Mutex<SharedCell>,
    honours: Honours,
    call: &mut impl FnMut(&mut dyn ModuleTxn, Option<Flow>) -> Flow,
    outcome: &mut PhaseOutcome,
) -> Progress {
    shared.lock().chain.run_from(0, honours, call, outcome)
}

/// [`ModuleChain::active_edits`] on a shared chain, under its lock; out of line, so that only
/// the common unshared case is inlined.
#[inline(never)]
fn edits_locked(shared: &parking_lot::Mutex<SharedCell>) -> Option<BodyEdits> {
    shared.lock().chain.active_edits()
}

/// [`ModuleChain::body_phase`] on a shared chain (a fill storing for its transaction), under
/// its lock; out of line, so that only the common unshared case is inlined.
#[inline(never)]
fn body_phase_locked(
    shared: &parking_lot::Mutex<SharedCell>,
    chunk: &mut BodyChunk,
    honours: Honours,
    call: impl FnMut(&mut dyn ModuleTxn, &mut BodyChunk) -> Flow,
) -> Result<Option<Box<LocalResponse>>, ModuleFailure> {
    shared.lock().chain.body_phase(chunk, honours, call)
}

impl Slot {
    /// Applies this module's verdict (the loops consume `Continue` and `Done` themselves);
    /// out of line, to keep the loops small. A `Buffer` the phase honours is remembered, so
    /// that an overflow fails this module and no other ([`ModuleChain::fail_buffering`]).
    #[inline(never)]
    fn step(&mut self, flow: Flow, honours: Honours) -> Step {
        match flow {
            Flow::Continue => Step::Go,
            Flow::Done => {
                self.active = false;
                Step::Go
            }
            Flow::Respond(response)
                if matches!(
                    honours,
                    Honours::Respond | Honours::RespondOrBufferRequest | Honours::RespondOrBufferResponse
                ) =>
            {
                Step::Respond(response)
            }
            Flow::Respond(_) => {
                tracing::warn!("module {} answered Respond where it cannot; ignored", self.module.name());
                Step::Go
            }
            Flow::Buffer { max } if honours == Honours::RespondOrBufferRequest => {
                self.buffers_request = true;
                Step::Buffer(max)
            }
            Flow::Buffer { max } if honours == Honours::RespondOrBufferResponse => {
                self.buffers_response = true;
                Step::Buffer(max)
            }
            Flow::Buffer { .. } => {
                tracing::warn!("module {} answered Buffer where it cannot; ignored", self.module.name());
                Step::Go
            }
            Flow::Defer { .. } => {
                tracing::warn!("module {} deferred in a body phase, where it cannot; ignored", self.module.name());
                Step::Go
            }
        }
    }

    /// Applies this module's failure policy: open skips it from now on, closed fails the
    /// transaction.
    #[cold]
    fn fail(&mut self, what: &str) -> Result<(), ModuleFailure> {
        self.active = false;
        tracing::error!("module {} {what}", self.module.name());
        match self.on_error {
            FailurePolicy::Open => Ok(()),
            FailurePolicy::Closed => Err(ModuleFailure(Box::new(FailureDetail {
                module: self.module.name().to_owned(),
                what: what.to_owned(),
            }))),
        }
    }
}

/// A module panicked in `new_txn`: it sits the transaction out, which fails closed when the
/// module guards it so.
#[cold]
fn new_txn_panicked(loaded: &LoadedModule) -> Result<(), ModuleFailure> {
    tracing::error!("module {} panicked in new_txn", loaded.module.name());
    match loaded.on_error {
        FailurePolicy::Open => Ok(()),
        FailurePolicy::Closed => Err(ModuleFailure(Box::new(FailureDetail {
            module: loaded.module.name().to_owned(),
            what: "panicked in new_txn".to_owned(),
        }))),
    }
}

/// Stands in for a state while it is dropped (a zero-sized box costs no allocation).
struct Dropped;

impl ModuleTxn for Dropped {}

impl Drop for Slot {
    fn drop(&mut self) {
        let state = std::mem::replace(&mut self.state, Box::new(Dropped));
        if std::panic::catch_unwind(AssertUnwindSafe(move || drop(state))).is_err() {
            tracing::error!("module {} panicked while its state was dropped", self.module.name());
        }
    }
}
