//! Callbacks that always come in a row, joined into one call into the instance.
//!
//! Each call from the host into wasm sets up trap handling and the stack limit, and the host
//! takes the instance's lock and lends the transaction's heads for it: about 250
//! instructions a call. A call between two wasm instances of one store is a plain indirect
//! call. So beside every plugin instance, in its store, runs a small wasm module of our own
//! with two exports that call the plugin's exports in turn:
//!
//! - `begin(context, headers, end)`: `proxy_on_context_create(context, root)` (the root
//!   context, [`ROOT_ID`]), then `proxy_on_request_headers(context, headers, end)`, whose
//!   action it returns. A context is created when its first callback comes, and for a
//!   client's request that is the request head.
//! - `end(context, _, _)`: `proxy_on_done`, `proxy_on_log`, `proxy_on_delete`; returns 0.
//!
//! Both have the signature of the body and headers callbacks, `(i32, i32, i32) -> i32`, so
//! that every call a transaction makes takes the same entry path (one instantiation of
//! wasmtime's typed call and one trampoline): the code a hit runs through stays small, which
//! counts as much as its instructions (docs/benchmarks.md, "Instructions against time").
//!
//! That makes four calls of the seven a transaction of an empty plugin made. The plugin sees
//! the same callbacks in the same order with the same arguments; a trap in any of them is a
//! trap of the call. Exports a plugin does not have are stood in for by host functions that
//! do what the host does when it would skip them one by one: nothing, `Continue` (0) for the
//! request head, true for `proxy_on_done`.

use crate::engine::engine;
use crate::host::HostState;
use crate::vm::ROOT_ID;
use std::sync::OnceLock;
use wasm_encoder::{
    CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection, ImportSection, TypeSection, ValType,
};
use wasmtime::{Extern, Func, Instance, Module, Store, TypedFunc};

/// `begin(context, headers, end) -> action` and `end(context, _, _) -> 0`: the signature of
/// the plugin's headers and body callbacks.
pub(crate) type Joined = TypedFunc<(i32, i32, i32), i32>;

/// The module's binary. Imports, from `plugin`: `create` `(i32, i32)`, `request_headers`
/// `(i32, i32, i32) -> i32`, `done` `(i32) -> i32`, `log` and `delete` `(i32)`. Exports
/// `begin` and `end` (module docs); `end` drops `done`'s answer, which the host never acts on.
fn encode() -> Vec<u8> {
    use ValType::I32;
    // Types.
    const PAIR: u32 = 0;
    const PHASE: u32 = 1;
    const DONE: u32 = 2;
    const UNIT: u32 = 3;
    let mut types = TypeSection::new();
    types.ty().function([I32, I32], []);
    types.ty().function([I32, I32, I32], [I32]);
    types.ty().function([I32], [I32]);
    types.ty().function([I32], []);
    // Functions: the imports, then `begin` and `end`.
    const CREATE: u32 = 0;
    const REQUEST_HEADERS: u32 = 1;
    const ON_DONE: u32 = 2;
    const ON_LOG: u32 = 3;
    const ON_DELETE: u32 = 4;
    const BEGIN_FUNCTION: u32 = 5;
    const END_FUNCTION: u32 = 6;
    let mut imports = ImportSection::new();
    for (name, ty) in [("create", PAIR), ("request_headers", PHASE), ("done", DONE), ("log", UNIT), ("delete", UNIT)] {
        imports.import("plugin", name, EntityType::Function(ty));
    }
    let mut functions = FunctionSection::new();
    functions.function(PHASE).function(PHASE);
    let mut exports = ExportSection::new();
    exports.export("begin", ExportKind::Func, BEGIN_FUNCTION).export("end", ExportKind::Func, END_FUNCTION);
    let mut begin = Function::new([]);
    begin.instructions().local_get(0).i32_const(ROOT_ID as i32).call(CREATE);
    begin.instructions().local_get(0).local_get(1).local_get(2).call(REQUEST_HEADERS).end();
    let mut end = Function::new([]);
    end.instructions().local_get(0).call(ON_DONE).drop().local_get(0).call(ON_LOG).local_get(0).call(ON_DELETE);
    end.instructions().i32_const(0).end();
    let mut code = CodeSection::new();
    code.function(&begin).function(&end);
    let mut module = wasm_encoder::Module::new();
    module.section(&types).section(&imports).section(&functions).section(&exports).section(&code);
    module.finish()
}

/// The module, compiled once for the process's engine.
fn module() -> Result<&'static Module, String> {
    static MODULE: OnceLock<Result<Module, String>> = OnceLock::new();
    MODULE
        .get_or_init(|| {
            let engine = engine()?;
            Module::new(engine, encode()).map_err(|err| format!("cannot compile the joined-callbacks module: {err}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The plugin's exports the module calls, those it has (`proxy_on_context_create` it must).
pub(crate) struct PluginExports<'a> {
    pub create: &'a TypedFunc<(i32, i32), ()>,
    pub request_headers: Option<&'a TypedFunc<(i32, i32, i32), i32>>,
    pub done: Option<&'a TypedFunc<i32, i32>>,
    pub log: Option<&'a TypedFunc<i32, ()>>,
    pub delete: Option<&'a TypedFunc<i32, ()>>,
}

/// Instantiates the module in `store`, linked to `exports`; returns `begin` and `end`.
pub(crate) fn instantiate(
    store: &mut Store<HostState>,
    exports: PluginExports<'_>,
) -> Result<(Joined, Joined), String> {
    let request_headers = match exports.request_headers {
        Some(export) => *export.func(),
        None => Func::wrap(&mut *store, |_: i32, _: i32, _: i32| 0i32),
    };
    let done = match exports.done {
        Some(export) => *export.func(),
        None => Func::wrap(&mut *store, |_: i32| 1i32),
    };
    let unit = |store: &mut Store<HostState>, export: Option<&TypedFunc<i32, ()>>| match export {
        Some(export) => *export.func(),
        None => Func::wrap(store, |_: i32| {}),
    };
    let log = unit(store, exports.log);
    let delete = unit(store, exports.delete);
    let imports = [*exports.create.func(), request_headers, done, log, delete].map(Extern::Func);
    let instance = Instance::new(&mut *store, module()?, &imports)
        .map_err(|err| format!("cannot link the joined-callbacks module: {err}"))?;
    let begin = instance.get_typed_func(&mut *store, "begin").map_err(|err| format!("joined callbacks: {err}"))?;
    let end = instance.get_typed_func(&mut *store, "end").map_err(|err| format!("joined callbacks: {err}"))?;
    Ok((begin, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::LogLevel;
    use crate::shared::{HostEnv, Shared};
    use bytes::Bytes;
    use std::sync::Arc;
    use wasm_encoder::{ConstExpr, GlobalSection, GlobalType};
    use wasmtime::Val;

    fn store() -> Store<HostState> {
        let shared = Shared::new("t", 1, Bytes::new(), Bytes::new(), LogLevel::Info, &HostEnv::default());
        let mut store = Store::new(engine().unwrap(), HostState::new(Arc::new(shared), 1 << 20));
        store.set_epoch_deadline(1_000);
        store
    }

    /// A plugin whose callbacks each append two digits to its exported global `trace`:
    /// `proxy_on_context_create(c, r)` c and r, `proxy_on_request_headers(c, n, e)` c and e
    /// (answering 7), `proxy_on_done`, `proxy_on_log`, `proxy_on_delete` c and 1, 2 or 3.
    fn tracing_plugin() -> Vec<u8> {
        use ValType::I32;
        let mut types = TypeSection::new();
        types.ty().function([I32, I32], []);
        types.ty().function([I32, I32, I32], [I32]);
        types.ty().function([I32], [I32]);
        types.ty().function([I32], []);
        let mut functions = FunctionSection::new();
        functions.function(0).function(1).function(2).function(3).function(3);
        let mut globals = GlobalSection::new();
        globals.global(GlobalType { val_type: I32, mutable: true, shared: false }, &ConstExpr::i32_const(0));
        let mut exports = ExportSection::new();
        let names = ["proxy_on_context_create", "proxy_on_request_headers", "proxy_on_done", "proxy_on_log"];
        for (index, name) in names.into_iter().chain(["proxy_on_delete"]).enumerate() {
            exports.export(name, ExportKind::Func, index as u32);
        }
        exports.export("trace", ExportKind::Global, 0);
        let mut code = CodeSection::new();
        // (ones digit: a local or a constant, the answer if any) after the tens digit, local 0.
        let bodies = [
            (Ok(1), None),     // create: context, root
            (Ok(2), Some(7)),  // request headers: headers, end
            (Err(1), Some(1)), // done
            (Err(2), None),    // log
            (Err(3), None),    // delete
        ];
        for (ones, answer) in bodies {
            let mut f = Function::new([]);
            let mut sink = f.instructions();
            sink.global_get(0).i32_const(100).i32_mul().local_get(0).i32_const(10).i32_mul().i32_add();
            match ones {
                Ok(local) => sink.local_get(local),
                Err(digit) => sink.i32_const(digit),
            };
            sink.i32_add().global_set(0);
            if let Some(answer) = answer {
                sink.i32_const(answer);
            }
            sink.end();
            code.function(&f);
        }
        let mut module = wasm_encoder::Module::new();
        module.section(&types).section(&functions).section(&globals).section(&exports).section(&code);
        module.finish()
    }

    /// A store with an instance of [`tracing_plugin`].
    fn tracing_instance() -> (Store<HostState>, Instance) {
        let mut store = store();
        let plugin = Module::new(engine().unwrap(), tracing_plugin()).unwrap();
        let instance = Instance::new(&mut store, &plugin, &[]).unwrap();
        (store, instance)
    }

    #[test]
    fn begin_and_end_call_the_plugins_callbacks_in_turn_with_their_arguments() {
        let (mut store, instance) = tracing_instance();
        let create = instance.get_typed_func(&mut store, "proxy_on_context_create").unwrap();
        let request_headers = instance.get_typed_func(&mut store, "proxy_on_request_headers").unwrap();
        let done = instance.get_typed_func(&mut store, "proxy_on_done").unwrap();
        let log = instance.get_typed_func(&mut store, "proxy_on_log").unwrap();
        let delete = instance.get_typed_func(&mut store, "proxy_on_delete").unwrap();
        let exports = PluginExports {
            create: &create,
            request_headers: Some(&request_headers),
            done: Some(&done),
            log: Some(&log),
            delete: Some(&delete),
        };
        let (begin, end) = instantiate(&mut store, exports).unwrap();
        let trace = instance.get_global(&mut store, "trace").unwrap();
        assert_eq!(begin.call(&mut store, (4, 3, 1)).unwrap(), 7, "the request head's action");
        assert_eq!(trace.get(&mut store).i32(), Some(41_41), "created under the root context, then the head");
        trace.set(&mut store, Val::I32(0)).unwrap();
        assert_eq!(end.call(&mut store, (4, 0, 0)).unwrap(), 0);
        assert_eq!(trace.get(&mut store).i32(), Some(41_42_43));
    }

    #[test]
    fn exports_a_plugin_does_not_have_are_skipped() {
        let (mut store, instance) = tracing_instance();
        let create = instance.get_typed_func(&mut store, "proxy_on_context_create").unwrap();
        let exports = PluginExports { create: &create, request_headers: None, done: None, log: None, delete: None };
        let (begin, end) = instantiate(&mut store, exports).unwrap();
        assert_eq!(begin.call(&mut store, (4, 3, 1)).unwrap(), 0, "Continue");
        assert_eq!(end.call(&mut store, (4, 0, 0)).unwrap(), 0);
        let trace = instance.get_global(&mut store, "trace").unwrap();
        assert_eq!(trace.get(&mut store).i32(), Some(41), "only proxy_on_context_create ran");
    }
}
