//! One simulation: a contender at one capacity over a trace, with the store's protocol.

use sluice_policy::belady::{next_uses, Belady, BeladySize, FutureRequest, Oracle};
use sluice_policy::{Capacity, Policy, PolicyConfig};

use super::{Contender, Timeline};
use crate::trace::Trace;

/// What one run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunResult {
    /// Requests simulated.
    pub requests: u64,
    /// Requests served from the cache.
    pub hits: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// Bytes served from the cache.
    pub hit_bytes: u64,
    /// Objects evicted to make room (not counting bypassed objects).
    pub evictions: u64,
    /// Per-request hits, when asked for.
    pub timeline: Option<Timeline>,
}

impl RunResult {
    /// Requests that missed.
    pub fn misses(&self) -> u64 {
        self.requests - self.hits
    }

    /// Bytes that had to be fetched.
    pub fn missed_bytes(&self) -> u64 {
        self.bytes - self.hit_bytes
    }

    /// Misses per request (0 for an empty trace).
    pub fn miss_ratio(&self) -> f64 {
        ratio(self.misses(), self.requests)
    }

    /// Missed bytes per requested byte (0 when nothing was requested).
    pub fn byte_miss_ratio(&self) -> f64 {
        ratio(self.missed_bytes(), self.bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Progress is reported in steps of this many requests (a power of two).
pub(crate) const PROGRESS_STEP: u64 = 1 << 16;

/// Runs `contender` over `trace` at `capacity`.
///
/// Online policies see exactly the store's protocol (see `sluice_policy`): hit, or miss ->
/// `on_miss`, evictions until the object fits, `on_insert`. An object larger than the whole
/// cache is a miss that is never inserted. `seed` seeds the policy's random choices;
/// `next` is the trace's next-use table (`sluice_policy::belady::next_uses`), computed here
/// if an oracle needs it and none is given. `progress` is called with the number of
/// requests done since its last call.
pub fn simulate(
    trace: &Trace,
    contender: Contender,
    capacity: Capacity,
    seed: u64,
    want_timeline: bool,
    next: Option<&[Option<u64>]>,
    progress: &(dyn Fn(u64) + Sync),
) -> RunResult {
    let config = PolicyConfig::new(capacity).with_seed(seed);
    let mut result = RunResult {
        requests: trace.requests.len() as u64,
        bytes: trace.bytes(),
        timeline: want_timeline.then(|| Timeline::new(trace.requests.len())),
        ..RunResult::default()
    };
    match contender {
        Contender::Policy(info) => run_online(trace, info.build(&config).as_mut(), capacity, &mut result, progress),
        Contender::Belady | Contender::BeladySize => {
            let owned;
            let next = match next {
                Some(n) => n,
                None => {
                    owned = next_uses(trace.requests.iter().map(|r| r.id));
                    &owned
                }
            };
            let mut oracle: Box<dyn Oracle> = match contender {
                Contender::BeladySize => Box::new(BeladySize::new(&config)),
                _ => Box::new(Belady::new(&config)),
            };
            run_oracle(trace, oracle.as_mut(), next, &mut result, progress);
        }
    }
    result
}

fn run_online(
    trace: &Trace,
    policy: &mut dyn Policy,
    capacity: Capacity,
    result: &mut RunResult,
    progress: &(dyn Fn(u64) + Sync),
) {
    let limit = capacity.limit();
    // Residency as a bitset (1 M objects fit in 128 KiB, so it stays in cache); weights are
    // only stored when they vary, that is under a byte capacity.
    let mut resident = Bits::new(trace.objects as usize);
    let mut weights = match capacity {
        Capacity::Bytes(_) => vec![0u64; trace.objects as usize],
        Capacity::Objects(_) => Vec::new(),
    };
    let mut used = 0u64;
    let (mut hits, mut hit_bytes, mut evictions) = (0u64, 0u64, 0u64);
    for (i, r) in trace.requests.iter().enumerate() {
        let id = r.id as usize;
        if resident.get(id) {
            hits += 1;
            hit_bytes += r.size;
            policy.on_hit(r.id, r.size);
            if let Some(t) = result.timeline.as_mut() {
                t.set_hit(i);
            }
        } else {
            policy.on_miss(r.id, r.size);
            let w = capacity.weight(r.size);
            if w <= limit {
                while used + w > limit {
                    let Some(victim) = policy.evict() else { break };
                    let v = victim as usize;
                    if v < trace.objects as usize && resident.get(v) {
                        resident.set(v, false);
                        used -= weights.get(v).copied().unwrap_or(1);
                    }
                    evictions += 1;
                }
                if used + w <= limit {
                    policy.on_insert(r.id, r.size);
                    resident.set(id, true);
                    if let Some(slot) = weights.get_mut(id) {
                        *slot = w;
                    }
                    used += w;
                }
            }
        }
        if (i as u64 + 1) & (PROGRESS_STEP - 1) == 0 {
            progress(PROGRESS_STEP);
        }
    }
    progress(trace.requests.len() as u64 % PROGRESS_STEP);
    result.hits = hits;
    result.hit_bytes = hit_bytes;
    result.evictions = evictions;
}

/// A fixed-size bitset indexed by dense object id.
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Self(vec![0; n.div_ceil(64)])
    }

    #[inline]
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }

    #[inline]
    fn set(&mut self, i: usize, on: bool) {
        let (w, b) = (i / 64, i % 64);
        self.0[w] = (self.0[w] & !(1 << b)) | (u64::from(on) << b);
    }
}

fn run_oracle(
    trace: &Trace,
    oracle: &mut dyn Oracle,
    next: &[Option<u64>],
    result: &mut RunResult,
    progress: &(dyn Fn(u64) + Sync),
) {
    for (i, r) in trace.requests.iter().enumerate() {
        let req = FutureRequest { now: i as u64, id: r.id, size: r.size, next: next[i] };
        if oracle.access(req) {
            result.hits += 1;
            result.hit_bytes += r.size;
            if let Some(t) = result.timeline.as_mut() {
                t.set_hit(i);
            }
        }
        if (i as u64 + 1) & (PROGRESS_STEP - 1) == 0 {
            progress(PROGRESS_STEP);
        }
    }
    progress(trace.requests.len() as u64 % PROGRESS_STEP);
}
