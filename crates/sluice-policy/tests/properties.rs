//! Property tests over every registered policy: protocol invariants under random requests
//! and removals, Belady's optimum as a lower bound, and LRU's stack property.

use std::collections::HashMap;

use proptest::prelude::*;
use sluice_policy::belady::{next_uses, Belady, FutureRequest, Oracle};
use sluice_policy::{build, names, Capacity, ObjectId, PolicyConfig};

#[derive(Clone, Debug)]
enum Op {
    Get(ObjectId, u64),
    Remove(ObjectId),
}

/// Drives `name` and checks the protocol's invariants; returns the misses.
fn misses(name: &str, capacity: Capacity, ops: &[Op]) -> usize {
    let mut policy = build(name, &PolicyConfig::new(capacity).with_seed(7)).unwrap();
    let mut resident: HashMap<ObjectId, u64> = HashMap::new();
    let mut used = 0;
    let mut misses = 0;
    for op in ops {
        match *op {
            Op::Get(id, size) => {
                if resident.contains_key(&id) {
                    policy.on_hit(id, size);
                    continue;
                }
                misses += 1;
                policy.on_miss(id, size);
                let w = capacity.weight(size);
                if w > capacity.limit() {
                    continue;
                }
                while used + w > capacity.limit() {
                    let v = policy.evict().expect("full cache must offer a victim");
                    used -= resident.remove(&v).unwrap_or_else(|| panic!("{name} evicted non-resident {v}"));
                }
                policy.on_insert(id, size);
                resident.insert(id, w);
                used += w;
            }
            Op::Remove(id) => {
                if let Some(w) = resident.remove(&id) {
                    used -= w;
                }
                policy.on_remove(id);
            }
        }
        assert_eq!(policy.len(), resident.len(), "{name}: len disagrees with the residents");
    }
    // Draining returns every resident exactly once.
    while let Some(v) = policy.evict() {
        assert!(resident.remove(&v).is_some(), "{name} drained non-resident {v}");
    }
    assert!(resident.is_empty(), "{name} lost residents {resident:?}");
    misses
}

fn belady_misses(capacity: Capacity, ids: &[ObjectId]) -> usize {
    let next = next_uses(ids.iter().copied());
    let mut b = Belady::new(&PolicyConfig::new(capacity));
    ids.iter()
        .enumerate()
        .filter(|&(i, &id)| !b.access(FutureRequest { now: i as u64, id, size: 1, next: next[i] }))
        .count()
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            9 => (0..40u64, 1..300u64).prop_map(|(id, size)| Op::Get(id, size)),
            1 => (0..40u64).prop_map(Op::Remove),
        ],
        0..400,
    )
}

/// Skewed ids (small ids more likely), as in real traces.
fn skewed_ids() -> impl Strategy<Value = Vec<ObjectId>> {
    prop::collection::vec((0..6u32, 0..64u64).prop_map(|(bits, r)| r % (1 << bits) + u64::from(bits) * 64 / 8), 1..500)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_by_object_count(ops in ops(), cap in 1..25u64) {
        for name in names() {
            misses(name, Capacity::Objects(cap), &ops);
        }
    }

    #[test]
    fn invariants_hold_by_bytes(ops in ops(), cap in 1..3000u64) {
        for name in names() {
            misses(name, Capacity::Bytes(cap), &ops);
        }
    }

    #[test]
    fn belady_bounds_every_policy_for_unit_sizes(ids in skewed_ids(), cap in 1..30u64) {
        let capacity = Capacity::Objects(cap);
        let bound = belady_misses(capacity, &ids);
        let gets: Vec<Op> = ids.iter().map(|&id| Op::Get(id, 1)).collect();
        for name in names() {
            let m = misses(name, capacity, &gets);
            prop_assert!(bound <= m, "{} missed {} < Belady {}", name, m, bound);
        }
    }

    #[test]
    fn lru_misses_never_rise_with_size(ids in skewed_ids()) {
        let gets: Vec<Op> = ids.iter().map(|&id| Op::Get(id, 1)).collect();
        let mut last = usize::MAX;
        for cap in 1..=45 {
            let m = misses("lru", Capacity::Objects(cap), &gets);
            prop_assert!(m <= last, "LRU at {} objects missed {} > {}", cap, m, last);
            last = m;
        }
    }

    #[test]
    fn belady_misses_never_rise_with_size(ids in skewed_ids()) {
        let mut last = usize::MAX;
        for cap in 1..=45 {
            let m = belady_misses(Capacity::Objects(cap), &ids);
            prop_assert!(m <= last);
            last = m;
        }
    }
}

#[test]
fn unknown_name_lists_valid_ones() {
    let err = build("lruu", &PolicyConfig::new(Capacity::Objects(1))).err().expect("unknown");
    let msg = err.to_string();
    assert!(msg.contains("\"lruu\"") && msg.contains("lru, lfu, fifo") && msg.contains("w-tinylfu"), "{msg}");
    assert!(build("S3FIFO", &PolicyConfig::new(Capacity::Objects(1))).is_ok());
    assert!(build("lfu_da", &PolicyConfig::new(Capacity::Objects(1))).is_ok());
}
