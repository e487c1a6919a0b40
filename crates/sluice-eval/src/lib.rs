//! Evaluation toolkit: trace readers, the trace-driven simulator behind `sluice sim`, its
//! reports (tables, CSV) and plots.
//!
//! The simulator drives the very policies the store runs (`sluice-policy`), with the same
//! protocol, so what is simulated is what runs. A typical run:
//!
//! ```no_run
//! use sluice_eval::sim::{run_grid, Contender, GridOptions, SizeSpec, Unit};
//! use sluice_eval::trace::{load, Format, ReadOptions};
//!
//! let trace = load("epa-http.txt".as_ref(), &ReadOptions::new(Format::Epa))?;
//! let sizes = SizeSpec::parse_list("10%,20%,50%")?;
//! let capacities = sizes.iter().map(|s| s.resolve(&trace, Unit::Objects)).collect::<Result<Vec<_>, _>>()?;
//! let contenders = Contender::parse_list("lru,s3-fifo,belady", Unit::Objects)?;
//! let cells = run_grid(&trace, &contenders, &capacities, &GridOptions::default());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod plot;
pub mod report;
pub mod sim;
pub mod trace;
