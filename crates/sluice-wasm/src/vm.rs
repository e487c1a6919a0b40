//! One plugin instance (a "VM" in Proxy-Wasm terms): its store, its root context, and the
//! calls into it, each under the epoch deadline and the memory limit.
//!
//! A [`Fault`] from any call means the instance is unusable: the caller must drop it.

use crate::compiled::CompiledPlugin;
use crate::engine::ticks_for;
use crate::grpc_stream::StreamEventKind;
use crate::host::{Call, GuestExports, HostState, Lend, Lending};
use crate::joined::{self, Joined, PluginExports};
use crate::kept::HeaderList;
use crate::shared::Shared;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{AsContextMut, Func, Instance, Store, Trap, TypedFunc, Val, WasmParams, WasmResults};

/// The root context's id in every instance.
pub(crate) const ROOT_ID: u32 = 1;

/// Why a call into an instance failed; the instance is lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The callback ran past its deadline.
    Deadline,
    /// The instance's memory would have grown past its limit.
    Memory,
    /// Any other trap.
    Trap(String),
    /// The plugin cannot start: an export it lacks, or a start-up callback
    /// (`proxy_on_vm_start`, `proxy_on_configure`) that returned false.
    Refused(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Deadline => f.write_str("callback deadline exceeded"),
            Fault::Memory => f.write_str("memory limit exceeded"),
            Fault::Trap(reason) => write!(f, "trap: {reason}"),
            Fault::Refused(reason) => f.write_str(reason),
        }
    }
}

/// A callback into an HTTP context (or, for `Tick`, the root context).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Callback {
    /// `proxy_on_context_create(ctx, root)`.
    Create,
    /// `proxy_on_context_create`, then `proxy_on_request_headers`, in one call (`joined.rs`).
    Begin {
        headers: usize,
        end: bool,
    },
    RequestHeaders {
        headers: usize,
        end: bool,
    },
    RequestBody {
        size: usize,
        end: bool,
    },
    ResponseHeaders {
        headers: usize,
        end: bool,
    },
    ResponseBody {
        size: usize,
        end: bool,
    },
    /// `proxy_on_http_call_response(ctx, token, headers, body_size, trailers)`.
    HttpCallResponse {
        token: u32,
        headers: usize,
        body: usize,
    },
    /// `proxy_on_grpc_receive(ctx, token, size)`: a gRPC call succeeded, or a stream got a
    /// message.
    GrpcReceive {
        token: u32,
        size: usize,
    },
    /// `proxy_on_grpc_receive_initial_metadata(ctx, token, count)`: a gRPC stream's answer
    /// began.
    GrpcReceiveInitialMetadata {
        token: u32,
        count: usize,
    },
    /// `proxy_on_grpc_receive_trailing_metadata(ctx, token, count)`: a gRPC stream's answer
    /// ended.
    GrpcReceiveTrailingMetadata {
        token: u32,
        count: usize,
    },
    /// `proxy_on_grpc_close(ctx, token, status)`: a gRPC call failed, or a stream ended.
    GrpcClose {
        token: u32,
        status: u32,
    },
    /// `proxy_on_queue_ready(root ctx, queue)`: a shared queue the context owns has items.
    QueueReady {
        id: u32,
    },
    Done,
    Delete,
    /// `proxy_on_done`, `proxy_on_log`, `proxy_on_delete` in one call (`joined.rs`).
    End,
    Tick,
}

impl Callback {
    /// How many of the plugin's callbacks the call makes: its deadline is that many
    /// callbacks' time.
    fn count(self) -> u64 {
        match self {
            Callback::Begin { .. } => 2,
            Callback::End => 3,
            _ => 1,
        }
    }
}

/// A headers or body callback: the signature the joined callbacks share (`joined.rs`).
type Phase = Option<Joined>;

/// `proxy_on_http_call_response(context, token, headers, body size, trailers)`.
type CallResponseExport = Option<TypedFunc<(i32, i32, i32, i32, i32), ()>>;

/// `proxy_on_grpc_receive(context, token, size)`, `proxy_on_grpc_close(context, token, status)`:
/// checked as typed, kept and called untyped. A typed call of this signature would be one
/// more instance of wasmtime's generic call path, which changes how the compiler inlines
/// the per-transaction callbacks' calls (+60 instructions per request on an empty plugin).
type GrpcExport = Option<Func>;

/// The plugin's callback exports (absent ones are skipped: `Continue`).
struct Exports {
    context_create: TypedFunc<(i32, i32), ()>,
    vm_start: Option<TypedFunc<(i32, i32), i32>>,
    configure: Option<TypedFunc<(i32, i32), i32>>,
    request_headers: Phase,
    request_body: Phase,
    response_headers: Phase,
    response_body: Phase,
    done: Option<TypedFunc<i32, i32>>,
    delete: Option<TypedFunc<i32, ()>>,
    /// The joined callbacks (`joined.rs`).
    begin: Joined,
    end: Joined,
    tick: Option<TypedFunc<i32, ()>>,
    http_call_response: CallResponseExport,
    grpc_receive: GrpcExport,
    grpc_close: GrpcExport,
    grpc_initial_metadata: GrpcExport,
    grpc_trailing_metadata: GrpcExport,
    queue_ready: Option<TypedFunc<(i32, i32), ()>>,
}

fn optional<P: WasmParams, R: WasmResults>(
    instance: &Instance,
    store: &mut Store<HostState>,
    name: &str,
) -> Result<Option<TypedFunc<P, R>>, String> {
    match instance.get_func(&mut *store, name) {
        None => Ok(None),
        Some(func) => func.typed::<P, R>(&*store).map(Some).map_err(|err| format!("export {name}: {err}")),
    }
}

/// [`optional`], kept untyped once its signature is checked.
fn untyped<P: WasmParams, R: WasmResults>(
    instance: &Instance,
    store: &mut Store<HostState>,
    name: &str,
) -> Result<Option<Func>, String> {
    optional::<P, R>(instance, store, name)?;
    Ok(instance.get_func(&mut *store, name))
}

impl Exports {
    fn resolve(instance: &Instance, store: &mut Store<HostState>) -> Result<Self, String> {
        let context_create = optional(instance, store, "proxy_on_context_create")?
            .ok_or_else(|| "no proxy_on_context_create export".to_string())?;
        let request_headers = optional(instance, store, "proxy_on_request_headers")?;
        let done = optional(instance, store, "proxy_on_done")?;
        let log = optional(instance, store, "proxy_on_log")?;
        let delete = optional(instance, store, "proxy_on_delete")?;
        let exports = PluginExports {
            create: &context_create,
            request_headers: request_headers.as_ref(),
            done: done.as_ref(),
            log: log.as_ref(),
            delete: delete.as_ref(),
        };
        let (begin, end) = joined::instantiate(store, exports)?;
        Ok(Self {
            context_create,
            vm_start: optional(instance, store, "proxy_on_vm_start")?,
            configure: optional(instance, store, "proxy_on_configure")?,
            request_headers,
            request_body: optional(instance, store, "proxy_on_request_body")?,
            response_headers: optional(instance, store, "proxy_on_response_headers")?,
            response_body: optional(instance, store, "proxy_on_response_body")?,
            done,
            delete,
            begin,
            end,
            tick: optional(instance, store, "proxy_on_tick")?,
            http_call_response: optional(instance, store, "proxy_on_http_call_response")?,
            grpc_receive: untyped::<(i32, i32, i32), ()>(instance, store, "proxy_on_grpc_receive")?,
            grpc_close: untyped::<(i32, i32, i32), ()>(instance, store, "proxy_on_grpc_close")?,
            grpc_initial_metadata: untyped::<(i32, i32, i32), ()>(
                instance,
                store,
                "proxy_on_grpc_receive_initial_metadata",
            )?,
            grpc_trailing_metadata: untyped::<(i32, i32, i32), ()>(
                instance,
                store,
                "proxy_on_grpc_receive_trailing_metadata",
            )?,
            queue_ready: optional(instance, store, "proxy_on_queue_ready")?,
        })
    }
}

/// A started plugin instance with its root context.
pub(crate) struct PluginVm {
    store: Store<HostState>,
    exports: Exports,
    next_id: u32,
    deadline: u64,
}

/// Converts a size for the guest (sizes past `i32::MAX` cannot exist in wasm32 memory).
fn guest_size(size: usize) -> i32 {
    i32::try_from(size).unwrap_or(i32::MAX)
}

impl PluginVm {
    /// Instantiates `compiled` and runs its start-up: `_initialize` (or `_start`), the root
    /// context's `proxy_on_context_create`, `proxy_on_vm_start` and `proxy_on_configure`.
    pub(crate) fn start(
        compiled: &CompiledPlugin,
        shared: Arc<Shared>,
        memory_bytes: usize,
        deadline: Duration,
        start_deadline: Duration,
    ) -> Result<Self, Fault> {
        let vm_config_len = shared.vm_config.len();
        let plugin_config_len = shared.plugin_config.len();
        let mut store = Store::new(compiled.pre.module().engine(), HostState::new(shared, memory_bytes));
        store.limiter(|state| &mut state.limiter);
        let start_deadline = ticks_for(start_deadline);
        store.set_epoch_deadline(start_deadline);
        let instance = compiled.pre.instantiate(&mut store).map_err(|err| classify(&mut store, err))?;
        let memory =
            instance.get_memory(&mut store, "memory").ok_or_else(|| Fault::Refused("no exported memory".into()))?;
        let alloc =
            match optional::<i32, i32>(&instance, &mut store, "proxy_on_memory_allocate").map_err(Fault::Refused)? {
                Some(alloc) => alloc,
                None => optional::<i32, i32>(&instance, &mut store, "malloc")
                    .map_err(Fault::Refused)?
                    .ok_or_else(|| Fault::Refused("no allocator export".into()))?,
            };
        store.data_mut().exports = Some(GuestExports { memory, alloc });
        for init in ["_initialize", "_start"] {
            if let Some(init) = optional::<(), ()>(&instance, &mut store, init).map_err(Fault::Refused)? {
                init.call(&mut store, ()).map_err(|err| classify(&mut store, err))?;
                break;
            }
        }
        let exports = Exports::resolve(&instance, &mut store).map_err(Fault::Refused)?;
        let mut vm = Self { store, exports, next_id: ROOT_ID + 1, deadline: ticks_for(deadline) };
        vm.store.data_mut().call.context_id = ROOT_ID;
        let root = ROOT_ID as i32;
        vm.store.set_epoch_deadline(start_deadline);
        vm.exports.context_create.call(&mut vm.store, (root, 0)).map_err(|err| classify(&mut vm.store, err))?;
        if let Some(vm_start) = vm.exports.vm_start.clone() {
            vm.store.set_epoch_deadline(start_deadline);
            let ok = vm_start
                .call(&mut vm.store, (root, guest_size(vm_config_len)))
                .map_err(|err| classify(&mut vm.store, err))?;
            if ok == 0 {
                return Err(Fault::Refused("proxy_on_vm_start returned false".into()));
            }
        }
        if let Some(configure) = vm.exports.configure.clone() {
            vm.store.set_epoch_deadline(start_deadline);
            let ok = configure
                .call(&mut vm.store, (root, guest_size(plugin_config_len)))
                .map_err(|err| classify(&mut vm.store, err))?;
            if ok == 0 {
                return Err(Fault::Refused("proxy_on_configure returned false (configuration rejected)".into()));
            }
        }
        vm.store.data_mut().call = Call::default();
        Ok(vm)
    }

    /// A new HTTP context's id. The context itself is created (`proxy_on_context_create`)
    /// by its first callback: [`Callback::Create`], or [`Callback::Begin`] for a request head.
    pub(crate) fn new_context(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id = match self.next_id.wrapping_add(1) {
            0 | ROOT_ID => ROOT_ID + 1,
            next => next,
        };
        id
    }

    /// Runs `callback` for context `context` with `lend` (what an HTTP-context callback may
    /// see and change; `None` for the root context) in reach of the host functions for the
    /// duration of the call only; returns the callback's result (`0` for `Continue`, the
    /// `proxy_on_done` boolean, `0` for callbacks without one or that the plugin does not
    /// export).
    pub(crate) fn invoke(
        &mut self,
        context: u32,
        callback: Callback,
        lend: Option<&mut Lend<'_>>,
    ) -> Result<i32, Fault> {
        let Self { store, exports, deadline, .. } = self;
        store.data_mut().call.context_id = context;
        let ends = matches!(callback, Callback::Delete | Callback::End);
        store.data_mut().call.ending = ends || matches!(callback, Callback::Done);
        store.set_epoch_deadline(callback.count() * *deadline);
        let mut lending = Lending::new(store, lend);
        let result = call(exports, lending.store(), context as i32, callback);
        drop(lending);
        if ends {
            forget_context(store.data_mut(), context);
        }
        result.map_err(|err| classify(&mut self.store, err))
    }

    /// [`Self::invoke`] for a root or HTTP context outside its phases, with what a gRPC
    /// stream delivers in reach of the host functions for the duration of the call.
    pub(crate) fn invoke_with_event(
        &mut self,
        context: u32,
        callback: Callback,
        event: StreamEventKind,
    ) -> Result<i32, Fault> {
        self.store.data_mut().event = Some(event);
        let result = self.invoke(context, callback, None);
        self.store.data_mut().event = None;
        result
    }

    /// This instance's identity (`HostState::instance`).
    pub(crate) fn instance(&self) -> u64 {
        self.store.data().instance
    }

    /// An empty header list for a kept head: one an ended transaction gave back, or a new
    /// one.
    pub(crate) fn spare_list(&mut self) -> HeaderList {
        self.store.data_mut().spare_lists.pop().unwrap_or_default()
    }

    /// Takes back the storage of an ended transaction's header list for later ones (if it
    /// has any, and only a few, small ones), leaving it empty.
    #[inline]
    pub(crate) fn recycle(&mut self, list: &mut HeaderList) {
        if !list.has_storage() {
            return;
        }
        let spare = &mut self.store.data_mut().spare_lists;
        if spare.len() < MAX_SPARE_LISTS && list.capacity() <= MAX_SPARE_BYTES {
            spare.extend(std::mem::take(list).recycle());
        }
    }
}

/// Most spare header lists an instance keeps, and the most storage each may hold on to.
const MAX_SPARE_LISTS: usize = 64;
const MAX_SPARE_BYTES: usize = 16 << 10;

/// Calls the export for `callback` (absent ones answer as `Continue`).
///
/// The callbacks of a transaction's phases, joined or not, share one signature
/// (`(context, size, end_of_stream) -> action`, `joined.rs`) and one call site here, so that
/// they run through one copy of wasmtime's entry code; the others are out of line
/// ([`call_other`]).
fn call(exports: &Exports, store: &mut Store<HostState>, ctx: i32, callback: Callback) -> wasmtime::Result<i32> {
    let (export, size, end) = match callback {
        Callback::Begin { headers, end } => (Some(&exports.begin), headers, end),
        Callback::RequestHeaders { headers, end } => (exports.request_headers.as_ref(), headers, end),
        Callback::RequestBody { size, end } => (exports.request_body.as_ref(), size, end),
        Callback::ResponseHeaders { headers, end } => (exports.response_headers.as_ref(), headers, end),
        Callback::ResponseBody { size, end } => (exports.response_body.as_ref(), size, end),
        Callback::End => (Some(&exports.end), 0, false),
        _ => return call_other(exports, store, ctx, callback),
    };
    match export {
        Some(f) => f.call(store.as_context_mut(), (ctx, guest_size(size), i32::from(end))),
        None => Ok(0),
    }
}

/// [`call`] for the callbacks outside a transaction's phases: context creation on its own,
/// done and delete on their own, the tick, and the events ([`call_event`]).
#[inline(never)]
fn call_other(exports: &Exports, store: &mut Store<HostState>, ctx: i32, callback: Callback) -> wasmtime::Result<i32> {
    let unit = |f: &Option<TypedFunc<i32, ()>>, store: &mut Store<HostState>| match f {
        Some(f) => f.call(store.as_context_mut(), ctx).map(|()| 0),
        None => Ok(0),
    };
    match callback {
        Callback::Create => exports.context_create.call(store.as_context_mut(), (ctx, ROOT_ID as i32)).map(|()| 0),
        Callback::Done => match &exports.done {
            Some(f) => f.call(store.as_context_mut(), ctx),
            None => Ok(1),
        },
        Callback::Delete => unit(&exports.delete, store),
        Callback::Tick => unit(&exports.tick, store),
        Callback::HttpCallResponse { .. }
        | Callback::GrpcReceive { .. }
        | Callback::GrpcClose { .. }
        | Callback::GrpcReceiveInitialMetadata { .. }
        | Callback::GrpcReceiveTrailingMetadata { .. }
        | Callback::QueueReady { .. } => call_event(exports, store, ctx, callback),
        // Phases: `call` takes them itself.
        Callback::Begin { .. }
        | Callback::RequestHeaders { .. }
        | Callback::RequestBody { .. }
        | Callback::ResponseHeaders { .. }
        | Callback::ResponseBody { .. }
        | Callback::End => call(exports, store, ctx, callback),
    }
}

/// [`call`] for the callbacks that tell a plugin of an event (the answer to its call, a
/// queue's new items): rare, and out of line so that the per-transaction callbacks' calls
/// into wasmtime stay inlined. (Events are variants of [`Callback`] itself rather than of an
/// enum of their own in one: a nested enum makes every `match` on a callback decode a
/// shared tag, about 20 instructions per request over an HTTP context's seven callbacks.)
#[cold]
#[inline(never)]
fn call_event(exports: &Exports, store: &mut Store<HostState>, ctx: i32, callback: Callback) -> wasmtime::Result<i32> {
    let grpc = |f: &GrpcExport, store: &mut Store<HostState>, token: u32, value: i32| match f {
        Some(f) => f
            .call(store.as_context_mut(), &[Val::I32(ctx), Val::I32(token as i32), Val::I32(value)], &mut [])
            .map(|()| 0),
        None => Ok(0),
    };
    match callback {
        Callback::HttpCallResponse { token, headers, body } => match &exports.http_call_response {
            Some(f) => f
                .call(store.as_context_mut(), (ctx, token as i32, guest_size(headers), guest_size(body), 0))
                .map(|()| 0),
            None => Ok(0),
        },
        Callback::GrpcReceive { token, size } => grpc(&exports.grpc_receive, store, token, guest_size(size)),
        Callback::GrpcClose { token, status } => grpc(&exports.grpc_close, store, token, status as i32),
        Callback::GrpcReceiveInitialMetadata { token, count } => {
            grpc(&exports.grpc_initial_metadata, store, token, guest_size(count))
        }
        Callback::GrpcReceiveTrailingMetadata { token, count } => {
            grpc(&exports.grpc_trailing_metadata, store, token, guest_size(count))
        }
        Callback::QueueReady { id } => match &exports.queue_ready {
            Some(f) => f.call(store.as_context_mut(), (ctx, id as i32)),
            None => Ok(()),
        }
        .map(|()| 0),
        // Not events: `call` handles them.
        _ => Ok(0),
    }
}

/// Drops what context `context` leaves behind: the properties it set, the gRPC streams it
/// opened (cancelled). Most plugins set no properties and open no streams: the property map
/// is then empty and its lookup (a SipHash of the id) is skipped, and so are the streams.
fn forget_context(state: &mut HostState, context: u32) {
    if !state.properties.is_empty() {
        state.properties.remove(&context);
    }
    if state.opened_streams {
        state.shared.grpc_streams.cancel_context(state.instance, context);
    }
}

/// Sorts a failed call into a [`Fault`].
fn classify(store: &mut Store<HostState>, err: wasmtime::Error) -> Fault {
    if std::mem::take(&mut store.data_mut().limiter.hit) {
        return Fault::Memory;
    }
    if matches!(err.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return Fault::Deadline;
    }
    Fault::Trap(format!("{err:#}"))
}
