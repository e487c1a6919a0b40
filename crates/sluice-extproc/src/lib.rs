//! Helper processes for Sluice modules: slow or CPU-heavy work (an image transcoder, a
//! scanner) runs in a separate process that Sluice starts, supervises and restarts, and that
//! speaks Envoy's external processing protocol (`envoy.service.ext_proc.v3.ExternalProcessor`,
//! a bidirectional gRPC stream per transaction) on a Unix socket, so existing ext_proc
//! processors work unchanged.
//!
//! - [`ExtProc`] starts the supervisor and hands out the module, [`ExtProcModule`]: it sends
//!   messages to the helper with `Flow::Defer` and applies the answers when the host resumes
//!   the phase (`Txn::resumed`).
//! - [`supervisor`]: spawn (at a nice level), wait for the socket, restart with exponential
//!   backoff, state and counters for `GET /modules/<name>/status`.
//! - [`headers`]: heads to ext_proc messages and mutations back, with Envoy's semantics.
//! - [`pb`]: the wire-compatible subset of Envoy's protobuf messages.
//!
//! See `docs/modules-extproc.md`.

pub mod config;
pub mod headers;
pub mod module;
pub mod pb;
pub mod supervisor;

pub use config::{BodyMode, ExtProcConfig, OnUnavailable, ResponsePhase};
pub use module::{ExtProc, ExtProcModule};
pub use supervisor::{Counters, HelperState, HelperStatus};
