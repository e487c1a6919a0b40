//! The resource manager: bytes and entries charged to a tier, high- and low-water marks, and
//! eviction by the tier's replacement policy. Pure bookkeeping (no I/O), so it can be
//! property-tested on its own; the tier turns the ids it evicts into deleted files.

use sluice_policy::{IdMap, ObjectId, Policy};

/// High- and low-water marks as fractions of a tier's limits (bytes and entries alike).
///
/// When an admission would take usage above the high mark, the manager evicts until the
/// usage *including the new object* is at or below the low mark, so eviction runs in
/// batches rather than once per insert, and usage after an admission never exceeds the
/// high mark.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaterMarks {
    pub high: f64,
    pub low: f64,
}

impl Default for WaterMarks {
    /// 95% and 90%, as Squid's `cache_swap_high` / `cache_swap_low`.
    fn default() -> Self {
        Self { high: 0.95, low: 0.90 }
    }
}

impl WaterMarks {
    /// Marks at `high` and `low` (fractions); `None` unless `0 < low <= high <= 1`.
    pub fn new(high: f64, low: f64) -> Option<Self> {
        (low > 0.0 && low <= high && high <= 1.0).then_some(Self { high, low })
    }

    fn apply(self, limits: Limits) -> (Limits, Limits) {
        let mark = |limit: u64, f: f64| ((limit as f64 * f) as u64).max(1).min(limit.max(1));
        (
            Limits { bytes: mark(limits.bytes, self.high), entries: mark(limits.entries, self.high) },
            Limits { bytes: mark(limits.bytes, self.low), entries: mark(limits.entries, self.low) },
        )
    }
}

/// A budget: bytes and entries. `u64::MAX` entries means no entry limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub bytes: u64,
    pub entries: u64,
}

/// Why an object was not stored. None of these is a request failure: the response is still
/// served to the client; it is just not cached by this tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotStored {
    /// Admission is paused: the disk reported ENOSPC (or EDQUOT) recently, or the manager
    /// could not make room.
    Full,
    /// Larger than the largest object the tier accepts.
    TooLarge,
    /// A copy of the same variant whose write was ticketed later is stored already and wins
    /// (see `WriteTicket`).
    Superseded,
    /// The write was abandoned by the caller (the source failed or the writer was dropped).
    Aborted,
    /// Another I/O error (e.g. EIO); counted and logged by the caller, the request goes on.
    Io(String),
}

impl std::fmt::Display for NotStored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotStored::Full => f.write_str("not stored: tier full"),
            NotStored::TooLarge => f.write_str("not stored: object too large"),
            NotStored::Superseded => f.write_str("not stored: superseded by a newer copy"),
            NotStored::Aborted => f.write_str("not stored: write aborted"),
            NotStored::Io(e) => write!(f, "not stored: {e}"),
        }
    }
}

impl std::error::Error for NotStored {}

/// Manager counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManagerStats {
    pub admissions: u64,
    pub evictions: u64,
    pub rejected_too_large: u64,
    pub rejected_full: u64,
}

/// Accounting and eviction for one tier.
pub struct ResourceManager {
    configured: Limits,
    /// The limits in force: `configured`, or less after the disk reported full.
    limits: Limits,
    water: WaterMarks,
    max_object: u64,
    policy: Box<dyn Policy>,
    sizes: IdMap<u64>,
    bytes: u64,
    stats: ManagerStats,
}

impl std::fmt::Debug for ResourceManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceManager")
            .field("limits", &self.limits)
            .field("bytes", &self.bytes)
            .field("entries", &self.sizes.len())
            .finish()
    }
}

impl ResourceManager {
    /// A manager enforcing `limits` with `water` marks, accepting objects of at most
    /// `max_object` bytes (and never more than the low-water mark), evicting by `policy`.
    pub fn new(limits: Limits, water: WaterMarks, max_object: u64, policy: Box<dyn Policy>) -> Self {
        Self {
            configured: limits,
            limits,
            water,
            max_object,
            policy,
            sizes: IdMap::default(),
            bytes: 0,
            stats: ManagerStats::default(),
        }
    }

    /// The high-water marks in force.
    pub fn high(&self) -> Limits {
        self.water.apply(self.limits).0
    }

    /// The low-water marks in force.
    pub fn low(&self) -> Limits {
        self.water.apply(self.limits).1
    }

    /// The limits in force (smaller than configured after the disk reported full).
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The limits as configured.
    pub fn configured(&self) -> Limits {
        self.configured
    }

    /// The largest object admitted, in bytes.
    pub fn max_object(&self) -> u64 {
        self.max_object.min(self.low().bytes)
    }

    /// Bytes charged.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries charged.
    pub fn entries(&self) -> u64 {
        self.sizes.len() as u64
    }

    /// True when `id` is charged.
    pub fn contains(&self, id: ObjectId) -> bool {
        self.sizes.contains_key(&id)
    }

    /// Counters.
    pub fn stats(&self) -> ManagerStats {
        self.stats
    }

    /// Admits `id` with `size` bytes, evicting by policy when the high mark would be passed;
    /// the ids evicted are appended to `victims` (also on failure). An `id` already charged is
    /// uncharged first, whether or not the new size is then admitted.
    pub fn admit(&mut self, id: ObjectId, size: u64, victims: &mut Vec<ObjectId>) -> Result<(), NotStored> {
        self.remove(id);
        if size > self.max_object() {
            self.stats.rejected_too_large += 1;
            return Err(NotStored::TooLarge);
        }
        self.policy.on_miss(id, size);
        let (high, low) = self.water.apply(self.limits);
        if self.bytes + size > high.bytes || self.entries() + 1 > high.entries {
            while self.bytes + size > low.bytes || self.entries() + 1 > low.entries {
                if !self.evict_one(victims) {
                    self.stats.rejected_full += 1;
                    return Err(NotStored::Full);
                }
            }
        }
        self.sizes.insert(id, size);
        self.bytes += size;
        self.policy.on_insert(id, size);
        self.stats.admissions += 1;
        Ok(())
    }

    /// Counts a hit on `id` (ignored when not charged).
    pub fn hit(&mut self, id: ObjectId) {
        if let Some(&size) = self.sizes.get(&id) {
            self.policy.on_hit(id, size);
        }
    }

    /// Uncharges `id` (purge, replacement, corruption found); returns its size.
    pub fn remove(&mut self, id: ObjectId) -> Option<u64> {
        let size = self.sizes.remove(&id)?;
        self.bytes -= size;
        self.policy.on_remove(id);
        Some(size)
    }

    /// The disk is full below our configured capacity: take the current usage as the byte
    /// limit and evict down to its low-water mark, so the next admissions find room. Ids
    /// evicted are appended to `victims`.
    pub fn clamp_to_usage(&mut self, victims: &mut Vec<ObjectId>) {
        self.limits.bytes = self.limits.bytes.min(self.bytes);
        self.evict_to_low(victims);
    }

    /// Restores the configured limits (after a disk-full pause ended).
    pub fn restore(&mut self) {
        self.limits = self.configured;
    }

    /// Evicts until usage is at or below the low-water marks (used after recovery, when the
    /// configuration shrank). Ids evicted are appended to `victims`.
    pub fn evict_to_low(&mut self, victims: &mut Vec<ObjectId>) {
        let low = self.low();
        while (self.bytes > low.bytes || self.entries() > low.entries) && self.evict_one(victims) {}
    }

    fn evict_one(&mut self, victims: &mut Vec<ObjectId>) -> bool {
        loop {
            let Some(victim) = self.policy.evict() else { return false };
            // A policy may hand back an id it tracked but we no longer charge; skip it.
            if let Some(size) = self.sizes.remove(&victim) {
                self.bytes -= size;
                self.stats.evictions += 1;
                victims.push(victim);
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_policy::{Capacity, PolicyConfig};
    use std::collections::HashMap;

    fn manager(policy: &str, bytes: u64, entries: u64, water: WaterMarks) -> ResourceManager {
        let policy = sluice_policy::build(policy, &PolicyConfig::new(Capacity::Bytes(bytes))).expect("policy exists");
        ResourceManager::new(Limits { bytes, entries }, water, u64::MAX, policy)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Remove(u64),
        Hit(u64),
        DiskFull,
        Restore,
        EvictToLow,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..60, 1u64..3000).prop_map(|(id, size)| Op::Insert(id, size)),
            1 => (0u64..60).prop_map(Op::Remove),
            2 => (0u64..60).prop_map(Op::Hit),
            1 => Just(Op::DiskFull),
            1 => Just(Op::Restore),
            1 => Just(Op::EvictToLow),
        ]
    }

    fn check_invariants(m: &ResourceManager, shadow: &HashMap<u64, u64>) {
        assert_eq!(m.bytes(), shadow.values().sum::<u64>(), "bytes match the residents");
        assert_eq!(m.entries(), shadow.len() as u64);
        assert_eq!(m.policy.len(), shadow.len(), "policy tracks exactly the residents");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

        #[test]
        fn water_marks_hold_under_random_load(
            policy in prop::sample::select(vec!["lru", "fifo", "lfu", "s3-fifo", "gdsf", "sieve", "arc", "w-tinylfu", "maxs"]),
            bytes in 2_000u64..40_000,
            entries in 2u64..40,
            high in 0.5f64..1.0,
            low_share in 0.3f64..1.0,
            ops in prop::collection::vec(op(), 1..400),
        ) {
            let water = WaterMarks::new(high, high * low_share).unwrap();
            let mut m = manager(policy, bytes, entries, water);
            let mut shadow: HashMap<u64, u64> = HashMap::new();
            for op in ops {
                let mut victims = Vec::new();
                match op {
                    Op::Insert(id, size) => {
                        shadow.remove(&id);
                        let result = m.admit(id, size, &mut victims);
                        for v in &victims {
                            prop_assert!(shadow.remove(v).is_some(), "victim {v} was resident");
                        }
                        match result {
                            Ok(()) => {
                                shadow.insert(id, size);
                                let (high, low) = (m.high(), m.low());
                                prop_assert!(m.bytes() <= high.bytes, "bytes {} > high {}", m.bytes(), high.bytes);
                                prop_assert!(m.entries() <= high.entries);
                                if !victims.is_empty() {
                                    prop_assert!(m.bytes() <= low.bytes, "after eviction bytes {} > low {}", m.bytes(), low.bytes);
                                    prop_assert!(m.entries() <= low.entries);
                                }
                            }
                            Err(NotStored::TooLarge) => prop_assert!(size > m.max_object()),
                            Err(other) => prop_assert!(false, "unexpected {other:?}"),
                        }
                    }
                    Op::Remove(id) => {
                        prop_assert_eq!(m.remove(id), shadow.remove(&id));
                    }
                    Op::Hit(id) => m.hit(id),
                    Op::DiskFull => {
                        m.clamp_to_usage(&mut victims);
                        for v in &victims {
                            prop_assert!(shadow.remove(v).is_some());
                        }
                        prop_assert!(m.bytes() <= m.low().bytes.max(m.limits().bytes));
                        prop_assert!(m.limits().bytes <= m.configured().bytes);
                    }
                    Op::Restore => m.restore(),
                    Op::EvictToLow => {
                        m.evict_to_low(&mut victims);
                        for v in &victims {
                            prop_assert!(shadow.remove(v).is_some(), "victim {v} was resident");
                        }
                        prop_assert!(m.bytes() <= m.low().bytes && m.entries() <= m.low().entries);
                    }
                }
                // Whatever the interleaving: never above the high marks in force.
                prop_assert!(m.bytes() <= m.high().bytes, "bytes {} > high {}", m.bytes(), m.high().bytes);
                prop_assert!(m.entries() <= m.high().entries);
                check_invariants(&m, &shadow);
            }
        }
    }

    #[test]
    fn eviction_runs_from_high_down_to_low() {
        let mut m = manager("fifo", 1000, u64::MAX, WaterMarks::new(0.9, 0.5).unwrap());
        let mut victims = Vec::new();
        for id in 0..9 {
            m.admit(id, 100, &mut victims).unwrap();
        }
        assert!(victims.is_empty());
        assert_eq!(m.bytes(), 900);
        m.admit(9, 100, &mut victims).unwrap();
        // 900 + 100 > 900 (high): evict FIFO until 100 + rest <= 500.
        assert_eq!(victims, vec![0, 1, 2, 3, 4]);
        assert_eq!(m.bytes(), 500);
    }

    #[test]
    fn entry_limit_has_water_marks_too() {
        let mut m = manager("lru", 1 << 30, 10, WaterMarks::new(0.9, 0.5).unwrap());
        let mut victims = Vec::new();
        for id in 0..10 {
            m.admit(id, 1, &mut victims).unwrap();
        }
        assert_eq!(m.entries(), 5, "the 10th entry passed the high mark (9) and evicted down to the low mark (5)");
        assert_eq!(victims.len(), 5);
    }

    #[test]
    fn objects_above_the_low_mark_are_too_large() {
        let mut m = manager("lru", 1000, u64::MAX, WaterMarks::new(0.9, 0.8).unwrap());
        assert_eq!(m.admit(1, 801, &mut Vec::new()), Err(NotStored::TooLarge));
        assert_eq!(m.admit(1, 800, &mut Vec::new()), Ok(()));
    }

    #[test]
    fn disk_full_clamps_to_usage_then_restores() {
        let mut m = manager("lru", 10_000, u64::MAX, WaterMarks::new(0.9, 0.5).unwrap());
        let mut victims = Vec::new();
        for id in 0..40 {
            m.admit(id, 100, &mut victims).unwrap();
        }
        assert_eq!(m.bytes(), 4000);
        m.clamp_to_usage(&mut victims);
        assert_eq!(m.limits().bytes, 4000);
        assert_eq!(m.bytes(), 2000);
        m.restore();
        assert_eq!(m.limits().bytes, 10_000);
    }
}
