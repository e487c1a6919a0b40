//! Belady's anomaly: a bigger cache that misses more on the same trace.

use sluice_policy::Capacity;

use super::{Cell, Contender};

/// One observed anomaly between two sizes of the same contender.
#[derive(Clone, Debug)]
pub struct Anomaly {
    /// Who showed it.
    pub contender: Contender,
    /// The smaller cache.
    pub smaller: Capacity,
    /// The bigger cache, which missed more.
    pub larger: Capacity,
    /// Misses at the smaller size.
    pub smaller_misses: u64,
    /// Misses at the bigger size.
    pub larger_misses: u64,
    /// Requests that hit in the smaller cache but missed in the bigger one (when the runs
    /// kept timelines).
    pub lost_hits: Option<u64>,
}

/// Every pair of consecutive sizes (in increasing capacity) where a contender's misses
/// rise. Stack algorithms (LRU, Belady) never appear; FIFO and RAND can.
pub fn find_anomalies(cells: &[Cell]) -> Vec<Anomaly> {
    let mut out = Vec::new();
    let mut names: Vec<&str> = cells.iter().map(|c| c.contender.name()).collect();
    names.dedup();
    for name in names {
        let mut mine: Vec<&Cell> = cells.iter().filter(|c| c.contender.name() == name).collect();
        mine.sort_by_key(|c| c.capacity.limit());
        for pair in mine.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.capacity.limit() > a.capacity.limit() && b.result.misses() > a.result.misses() {
                let lost_hits = match (&a.result.timeline, &b.result.timeline) {
                    (Some(x), Some(y)) => Some(x.hits_missed_by(y)),
                    _ => None,
                };
                out.push(Anomaly {
                    contender: a.contender,
                    smaller: a.capacity,
                    larger: b.capacity,
                    smaller_misses: a.result.misses(),
                    larger_misses: b.result.misses(),
                    lost_hits,
                });
            }
        }
    }
    out
}
