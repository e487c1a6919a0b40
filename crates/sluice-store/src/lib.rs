//! Sluice's cache store.
//!
//! - [`Object`]: a stored response (metadata + body), independent of where it came from.
//! - [`Fill`]: a body being filled from a source, readable by many clients while it grows.
//! - [`MemoryStore`]: the memory tier, bounded in bytes, evicting by a [`sluice_policy`] policy.
//! - [`Collapser`]: one fetch per key; concurrent requests wait on it and share its body.

mod body;
mod collapse;
mod fill;
mod memory;
mod object;

pub use body::{BodyChunks, StoredBody};
pub use collapse::{Collapser, Join, Leader, Outcome, Pending};
pub use fill::{Fill, FillError, FillReader};
pub use memory::{Lookup, MemoryStore, StoreStats};
pub use object::{Object, ObjectMeta};
