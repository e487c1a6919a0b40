//! Expiry processing for the disk tier: the memory tier's [`SweepRule`] applied to the disk
//! index. Entries are judged by their metadata and their hits (disk hits since written or
//! recovered, plus what the caller counts elsewhere, e.g. the memory copy's hits); removable
//! ones are dropped from the index and handed back as a [`Purge`] to delete their files.

use super::{DiskEntry, DiskTier, Purge};
use crate::{ObjectMeta, SweepReport, SweepRule, Verdict};
use sluice_policy::ObjectId;
use std::sync::Arc;
use std::time::SystemTime;

/// Entries judged per lock.
const SWEEP_BATCH: usize = 256;

impl DiskTier {
    /// Judges every entry at `now` by `rule`, with `hits_elsewhere` added to its own hit
    /// count (called without the tier's lock held), and forgets the removable ones at once
    /// (no lookup finds them after this returns). Returns what it saw and the files to
    /// delete ([`Purge::finish`], blocking). Memory only: copies the ids under one lock,
    /// then copies entries in batches of 256, one short lock each; an entry replaced by a
    /// newer write during the sweep is kept.
    pub fn sweep(
        &self,
        now: SystemTime,
        rule: &SweepRule,
        hits_elsewhere: impl Fn(&ObjectMeta) -> u64,
    ) -> (SweepReport, Purge) {
        let ids: Vec<ObjectId> = self.shared.inner.lock().entries.keys().copied().collect();
        let mut report = SweepReport::default();
        let mut doomed: Vec<Arc<DiskEntry>> = Vec::new();
        for batch in ids.chunks(SWEEP_BATCH) {
            let entries: Vec<Arc<DiskEntry>> = {
                let inner = self.shared.inner.lock();
                batch.iter().filter_map(|id| inner.entries.get(id).cloned()).collect()
            };
            for entry in entries {
                let hits = entry.hits() + hits_elsewhere(&entry.meta);
                match rule.judge_meta(&entry.meta, hits, now) {
                    Verdict::Remove => doomed.push(entry),
                    kept => report.count(kept, 0),
                }
            }
        }
        let mut inner = self.shared.inner.lock();
        let mut paths = Vec::new();
        for entry in doomed {
            let current = inner.entries.get(&entry.id()).is_some_and(|e| e.generation() == entry.generation());
            if current {
                inner.forget(entry.id());
                inner.manager.remove(entry.id());
                inner.counters.swept += 1;
                report.count(Verdict::Remove, entry.charge());
                paths.push(entry.path.clone());
            }
        }
        (report, Purge { paths })
    }
}
