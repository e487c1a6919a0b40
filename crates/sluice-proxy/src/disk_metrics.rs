//! The disk tier's gauges and counters in `/metrics` and `/stats` (absent without a disk
//! tier). Disk hits by result code are in `sluice_requests_total{result="TCP_HIT"}`.

use crate::tiers::Tiers;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

/// Prometheus text for the disk tier; empty without one.
pub fn prometheus(tiers: &Tiers) -> String {
    let Some(d) = tiers.disk_stats() else { return String::new() };
    let c = tiers.counters();
    let mut out = String::with_capacity(2048);
    let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    metric("sluice_disk_objects", "gauge", "Objects in the disk tier.", d.objects);
    metric("sluice_disk_bytes", "gauge", "Disk bytes used by the disk tier (whole 4 KiB blocks).", d.bytes);
    metric("sluice_disk_capacity_bytes", "gauge", "Configured capacity of the disk tier.", d.capacity);
    metric("sluice_disk_limit_bytes", "gauge", "Byte limit in force (lower after ENOSPC).", d.limit_bytes);
    metric("sluice_disk_high_water_bytes", "gauge", "High-water mark of the disk tier.", d.high_water_bytes);
    metric("sluice_disk_low_water_bytes", "gauge", "Low-water mark of the disk tier.", d.low_water_bytes);
    metric("sluice_disk_open_files", "gauge", "Object files kept open for disk hits.", d.open_files);
    metric("sluice_disk_hits_total", "counter", "Memory misses answered from disk.", c.disk_hits.load(Relaxed));
    metric(
        "sluice_disk_zero_copy_hits_total",
        "counter",
        "Disk hits sent with sendfile (plaintext HTTP/1.x, no module on the body).",
        c.zero_copy_hits.load(Relaxed),
    );
    metric(
        "sluice_disk_demotions_total",
        "counter",
        "Objects over promote_max moved from memory to disk once their disk copy was durable.",
        c.demotions.load(Relaxed),
    );
    metric(
        "sluice_disk_promotions_total",
        "counter",
        "Disk hits promoted into the memory tier.",
        c.promotions.load(Relaxed),
    );
    metric(
        "sluice_disk_read_failures_total",
        "counter",
        "Disk entries found but not served (corrupt, gone, unreadable).",
        c.disk_read_failures.load(Relaxed),
    );
    metric("sluice_disk_corrupt_total", "counter", "Disk objects dropped as corrupt at read.", d.corrupt_at_read);
    metric("sluice_disk_insertions_total", "counter", "Objects committed to disk.", d.insertions);
    metric("sluice_disk_evictions_total", "counter", "Objects evicted from disk by the policy.", d.evictions);
    metric("sluice_disk_removals_total", "counter", "Objects purged or invalidated on disk.", d.removals);
    metric(
        "sluice_disk_writes_not_stored_total",
        "counter",
        "Write-throughs the disk tier refused (full, too large, I/O error).",
        c.disk_writes_not_stored.load(Relaxed),
    );
    metric("sluice_disk_full_events_total", "counter", "Times the disk reported ENOSPC/EDQUOT.", d.full_events);
    metric("sluice_disk_write_errors_total", "counter", "Disk writes failed with an I/O error.", d.write_errors);
    metric(
        "sluice_disk_pending_jobs",
        "gauge",
        "Background disk writes and deletions.",
        tiers.pending_disk_jobs() as u64,
    );
    out
}

/// The `disk` object of `/stats`; `None` without a disk tier.
pub fn json(tiers: &Tiers) -> Option<serde_json::Value> {
    let d = tiers.disk_stats()?;
    let c = tiers.counters();
    Some(serde_json::json!({
        "objects": d.objects,
        "bytes": d.bytes,
        "capacity": d.capacity,
        "limit_bytes": d.limit_bytes,
        "high_water_bytes": d.high_water_bytes,
        "low_water_bytes": d.low_water_bytes,
        "max_entries": d.max_entries,
        "hits": c.disk_hits.load(Relaxed),
        "zero_copy_hits": c.zero_copy_hits.load(Relaxed),
        "open_files": d.open_files,
        "promotions": c.promotions.load(Relaxed),
        "demotions": c.demotions.load(Relaxed),
        "read_failures": c.disk_read_failures.load(Relaxed),
        "corrupt_at_read": d.corrupt_at_read,
        "verified_at_read": d.verified_at_read,
        "insertions": d.insertions,
        "evictions": d.evictions,
        "removals": d.removals,
        "swept": d.swept,
        "writes": c.disk_writes.load(Relaxed),
        "writes_not_stored": c.disk_writes_not_stored.load(Relaxed),
        "rejected_too_large": d.rejected_too_large,
        "rejected_full": d.rejected_full,
        "full_events": d.full_events,
        "write_errors": d.write_errors,
        "admission_paused": d.admission_paused,
        "pending_jobs": tiers.pending_disk_jobs(),
    }))
}
