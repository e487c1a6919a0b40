//! One module per subcommand; each exposes `Args` (clap) and `run`.

pub mod admin_client;
pub mod ctl;
pub mod fetch;
pub mod serve;
pub mod sim;

/// A single-threaded runtime for the admin API clients (`ctl`, `fetch`).
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")
}
