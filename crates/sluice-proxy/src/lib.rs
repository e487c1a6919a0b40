//! The Sluice proxy: listeners, forward/reverse/CONNECT, the transaction pipeline, upstream
//! pools, admin API, metrics, access log and configuration.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let config = sluice_proxy::config::Config::default();
//! let state = sluice_proxy::State::new(config, Arc::new(sluice_proxy::clock::SystemClock), vec![])?;
//! let running = sluice_proxy::start(state).await?;
//! println!("proxy on {}", running.listeners()[0]);
//! running.shutdown().await;
//! # Ok(()) }
//! ```

pub mod access_log;
pub mod acl;
mod admin;
mod admin_content;
mod admin_modules;
mod admin_pools;
mod body;
mod cache_flow;
mod cancels;
mod chain;
mod client_body;
pub mod client_cert;
mod client_map;
pub mod clock;
pub mod config;
pub mod conn_limit;
mod connect;
mod content;
mod content_fetch;
mod date;
mod deadline;
mod dest_acl;
pub mod disk_config;
mod disk_metrics;
pub mod error;
mod esi;
mod fill_budget;
mod forwarded;
mod framing;
mod gated;
pub mod generation;
mod grpc_health;
mod head_framing;
pub mod header_rules;
mod hit_for_pass;
mod idle;
mod in_flight;
mod invalidations;
mod latency;
pub mod listeners;
mod meta;
pub mod metrics;
mod module_list;
pub mod module_manager;
mod options_form;
pub mod origin_pool;
pub mod origin_tls;
pub mod outcome;
mod policy;
pub mod pool_config;
mod pool_metrics;
mod progress;
pub mod proxy_auth;
pub mod proxy_protocol;
mod rate_limit;
pub mod rate_limit_config;
mod refused;
mod reload_outcomes;
mod req_body;
mod resolve;
mod respond;
pub mod route;
mod server;
mod service;
mod sni;
mod source;
mod state;
mod stream_exec;
mod sweep;
mod switch_outcome;
pub mod tiers;
mod tiers_open;
mod timers;
pub mod tls;
mod txn;
pub mod units;
mod upgrade;
mod upstream;
mod ws_key;
mod zero_copy;

pub use chain::LoadedModule;
pub use module_list::ModuleList;
pub use server::{start, Running, StartError};
pub use state::{State, StateError};
