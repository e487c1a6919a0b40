//! A minimal driver for the policies' hand-checked unit tests.

use crate::{Capacity, ObjectId, Policy, PolicyConfig};

/// What a run produced: hits and the eviction sequence.
pub(crate) struct Run {
    pub hits: usize,
    pub victims: Vec<ObjectId>,
}

/// Drives `name` over `(id, size)` requests with the documented protocol.
pub(crate) fn drive(name: &str, capacity: Capacity, reqs: &[(ObjectId, u64)]) -> Run {
    let mut policy = crate::build(name, &PolicyConfig::new(capacity)).expect("registered");
    drive_policy(policy.as_mut(), capacity, reqs)
}

/// As [`drive`], for `policy` built by the caller.
pub(crate) fn drive_policy(policy: &mut dyn Policy, capacity: Capacity, reqs: &[(ObjectId, u64)]) -> Run {
    let mut resident = std::collections::HashMap::new();
    let mut used = 0;
    let mut run = Run { hits: 0, victims: Vec::new() };
    for &(id, size) in reqs {
        if resident.contains_key(&id) {
            run.hits += 1;
            policy.on_hit(id, size);
            continue;
        }
        policy.on_miss(id, size);
        let w = capacity.weight(size);
        while used + w > capacity.limit() {
            let v = policy.evict().expect("a full cache has a victim");
            used -= resident.remove(&v).expect("victim was resident");
            run.victims.push(v);
        }
        policy.on_insert(id, size);
        resident.insert(id, w);
        used += w;
        assert_eq!(policy.len(), resident.len());
    }
    run
}

/// Unit-size requests for `ids`.
pub(crate) fn unit(ids: &[ObjectId]) -> Vec<(ObjectId, u64)> {
    ids.iter().map(|&id| (id, 1)).collect()
}
