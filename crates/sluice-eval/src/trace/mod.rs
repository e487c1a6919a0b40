//! Request traces: reading log formats into a compact, in-memory [`Trace`].
//!
//! Every reader turns one line (or binary record) into a [`Record`]; [`load`] filters the
//! records ([`Filter`]), gives every distinct object key a dense id and counts what it
//! skipped. A malformed line never stops a load: it is counted, and its line number and
//! reason are kept for verbose reports.

mod filter;
mod format;
mod intern;
mod load;
mod readers;
mod record;
mod source;

pub use filter::Filter;
pub use format::{CsvColumns, Format, FormatError};
pub use load::{load, load_from, LoadError, ReadOptions};
pub use readers::encode_oracle_general;
pub use record::{Key, Record};

use sluice_policy::ObjectId;

/// One request of a loaded trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Dense object id: `0 <= id < Trace::objects`.
    pub id: ObjectId,
    /// Bytes of the response body as logged.
    pub size: u64,
}

/// A trace ready for simulation: requests in log order with dense object ids.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// What the trace was loaded from (for titles and reports).
    pub name: String,
    /// The kept requests, in order.
    pub requests: Vec<Request>,
    /// Number of distinct objects; ids run from 0 to `objects - 1`.
    pub objects: u64,
    /// Sum over distinct objects of their largest logged size: the bytes needed to cache
    /// every object at once.
    pub object_bytes: u64,
    /// What the reader saw and skipped.
    pub stats: LoadStats,
}

impl Trace {
    /// Builds a trace from `(key, size)` pairs given as numbers, for tests and generators.
    pub fn from_pairs(name: &str, pairs: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut interner = intern::Interner::default();
        let mut trace = Trace { name: name.to_owned(), ..Trace::default() };
        for (key, size) in pairs {
            let id = interner.id(Key::Id(key), size);
            trace.requests.push(Request { id, size });
            trace.stats.records += 1;
            trace.stats.kept += 1;
        }
        interner.finish(&mut trace);
        trace
    }

    /// Total bytes requested.
    pub fn bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.size).sum()
    }
}

/// Counts of what a load read, kept and skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Lines (or binary records) read, malformed ones included.
    pub records: u64,
    /// Records kept as requests.
    pub kept: u64,
    /// Well-formed records that the [`Filter`] dropped.
    pub filtered: u64,
    /// Malformed records (counted, skipped).
    pub malformed: u64,
    /// The first [`MAX_KEPT_ERRORS`] malformed records: line (or record) number, 1-based,
    /// and the reason.
    pub errors: Vec<(u64, String)>,
}

/// How many malformed-line reports a load keeps (all are counted).
pub const MAX_KEPT_ERRORS: usize = 1000;
