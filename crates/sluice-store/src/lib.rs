//! Sluice's cache store.
//!
//! - [`Object`]: a stored response (metadata + body), independent of where it came from.
//! - [`Fill`]: a body being filled from a source, readable by many clients while it grows.
//! - [`MemoryStore`]: the memory tier, bounded in bytes, evicting by a [`sluice_policy`] policy.
//! - [`Suspended`]: what the memory tier keeps of an evicted object with validators (its
//!   metadata, no body), so the next request can revalidate instead of fetching.
//! - [`AdmissionRule`]: which new objects the memory tier stores (always, second hit, TinyLFU).
//! - [`SweepRule`]: expiry processing: which stale, idle objects [`MemoryStore::sweep`] removes.
//! - [`Collapser`]: one fetch per key; concurrent requests wait on it and share its body.
//! - [`disk::DiskTier`]: the disk tier: checksummed files, durable commits, recovery on open,
//!   zero-copy (`sendfile`) hits, water-mark eviction by policy.

mod admission;
mod body;
mod collapse;
pub mod disk;
mod fill;
mod memory;
mod object;
mod suspend;
mod sweep;

pub use admission::AdmissionRule;
pub use body::{BodyChunks, RangeCut, StoredBody};
pub use collapse::{Collapser, Join, Leader, Outcome, Pending};
pub use disk::DiskTier;
pub use fill::{Fill, FillError, FillReader};
pub use memory::{Admit, KeptElsewhere, Lookup, MemoryStore, StoreStats};
pub use object::{stored_headers, Object, ObjectMeta, SERVE_HEADROOM};
pub use suspend::{suspendable, Suspended};
pub use sweep::{SweepReport, SweepRule, Verdict};
