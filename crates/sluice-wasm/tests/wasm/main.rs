//! sluice-wasm's integration tests: real plugins (built from `plugins/` for `wasm32-wasip1`
//! on first use) on a real wasmtime, driven through the `Module` / `Txn` contract.
//!
//! One test binary, so each plugin is built and compiled once.

mod support;

mod foreign;
mod limits;
mod phases;
mod reload;
