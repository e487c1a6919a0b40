//! Grid results as CSV, one row per (policy, size).

use std::io;

use sluice_policy::Capacity;

use crate::sim::{Cell, LatencyModel, SizeSpec};
use crate::trace::Trace;

/// Writes a header and one row per cell: trace, policy, label, oracle flag, size as given,
/// unit, capacity, requests, hits, misses, miss ratio, bytes, missed bytes, byte miss ratio,
/// evictions, and the access-time estimate under `latency`.
///
/// # Errors
/// Whatever writing to `out` returns.
pub fn write_csv(
    out: impl io::Write,
    trace: &Trace,
    cells: &[Cell],
    sizes: &[SizeSpec],
    latency: &LatencyModel,
) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "trace",
        "policy",
        "label",
        "oracle",
        "size",
        "unit",
        "capacity",
        "requests",
        "hits",
        "misses",
        "miss_ratio",
        "bytes",
        "missed_bytes",
        "byte_miss_ratio",
        "evictions",
        "access_time_s",
    ])?;
    for c in cells {
        let r = &c.result;
        let unit = match c.capacity {
            Capacity::Objects(_) => "objects",
            Capacity::Bytes(_) => "bytes",
        };
        w.write_record([
            trace.name.clone(),
            c.contender.name().to_owned(),
            c.contender.label().to_owned(),
            c.contender.is_oracle().to_string(),
            sizes.get(c.size_index).map(ToString::to_string).unwrap_or_default(),
            unit.to_owned(),
            c.capacity.limit().to_string(),
            r.requests.to_string(),
            r.hits.to_string(),
            r.misses().to_string(),
            format!("{:.6}", r.miss_ratio()),
            r.bytes.to_string(),
            r.missed_bytes().to_string(),
            format!("{:.6}", r.byte_miss_ratio()),
            r.evictions.to_string(),
            format!("{:.3}", latency.access_time_s(r)),
        ])?;
    }
    w.flush()
}
