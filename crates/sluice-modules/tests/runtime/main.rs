//! `[[module]]` entries of every kind on a real proxy, and modules loaded, reloaded and
//! unloaded while it serves (admin API and configuration reload). Real sockets on 127.0.0.1;
//! no sleeps as synchronisation.

mod admin_errors;
mod config_reload;
mod support;
mod under_load;
mod wasm_entry;
mod wasm_failures;
mod wasm_foreign;
mod wasm_framing;
mod wasm_grpc_call;
mod wasm_grpc_stream;
mod wasm_http_call;
mod wasm_queues;
