//! Shared test support: building the plugins, a cache double, and a driver that plays the
//! proxy's part (phase order, `Flow` handling) against a `Module`.
#![allow(dead_code)]

pub mod cache;
pub mod driver;
pub mod plugins;

pub use cache::MemCache;
pub use driver::{info, play, request, response, Exchange, Run};
pub use plugins::{compiled, wasm};
