//! The trace-driven simulator: one policy at one cache size ([`simulate`]), or a grid of
//! (policy, size) pairs across cores ([`run_grid`]), plus what is derived from results
//! (Belady's anomaly, access-time estimates).

mod anomaly;
mod contender;
mod engine;
mod grid;
mod latency;
mod sizes;
mod timeline;

pub use anomaly::{find_anomalies, Anomaly};
pub use contender::{Contender, UnknownContender};
pub use engine::{simulate, RunResult};
pub use grid::{run_grid, Cell, GridOptions};
pub use latency::LatencyModel;
pub use sizes::{SizeError, SizeSpec, Unit};
pub use timeline::Timeline;

/// The capacity type of `sluice-policy`, re-exported for callers of this module.
pub use sluice_policy::Capacity;
