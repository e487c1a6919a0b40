//! Admission to the memory tier: whether a new object (not resident, not suspended) is
//! stored at all.
//!
//! - [`AdmissionRule::Always`]: every object that fits is stored (the default).
//! - [`AdmissionRule::SecondHit`]: an object is stored on its second insertion attempt (its
//!   second miss) within a window. A bounded *doorkeeper* remembers the keys of first
//!   attempts in two generations of `window / 2` keys each: when the current generation is
//!   full it becomes the previous one and the old previous one is forgotten, so a key is
//!   remembered for at least `window / 2` and at most `window` later first attempts.
//! - [`AdmissionRule::TinyLfu`]: [`sluice_policy::admission::TinyLfu`]'s frequency sketch
//!   counts every lookup; an object that fits without eviction is stored; one that needs
//!   room is stored only if its key was requested more often than the key of the first
//!   victim the replacement policy offers (the victim stays otherwise).
//!
//! Admission is judged per primary key (variants of one URL share their popularity).

use sluice_policy::admission::{Admission, TinyLfu};
use std::collections::HashSet;

/// Which objects the memory tier admits. See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdmissionRule {
    #[default]
    Always,
    /// Store on the second miss within the last `window` first misses.
    SecondHit { window: usize },
    /// Store when more popular than the victim (TinyLFU sketch sized for `expected` keys).
    TinyLfu { expected: usize },
}

/// The admission state of one tier.
pub(crate) enum Admitter {
    Always,
    SecondHit { half: usize, current: HashSet<u64>, previous: HashSet<u64> },
    TinyLfu(TinyLfu),
}

impl Admitter {
    pub(crate) fn new(rule: AdmissionRule) -> Self {
        match rule {
            AdmissionRule::Always => Admitter::Always,
            AdmissionRule::SecondHit { window } => {
                Admitter::SecondHit { half: (window / 2).max(1), current: HashSet::new(), previous: HashSet::new() }
            }
            AdmissionRule::TinyLfu { expected } => Admitter::TinyLfu(TinyLfu::new(expected)),
        }
    }

    /// Counts one lookup of `key_id` (hit or miss).
    pub(crate) fn record(&mut self, key_id: u64) {
        if let Admitter::TinyLfu(sketch) = self {
            sketch.record(key_id);
        }
    }

    /// Judged before room is made: false when the doorkeeper has not seen `key_id` yet (it
    /// remembers it now). Always true for the other rules.
    pub(crate) fn passes_doorkeeper(&mut self, key_id: u64) -> bool {
        let Admitter::SecondHit { half, current, previous } = self else { return true };
        if current.remove(&key_id) || previous.remove(&key_id) {
            return true;
        }
        if current.len() >= *half {
            *previous = std::mem::take(current);
        }
        current.insert(key_id);
        false
    }

    /// True for TinyLFU, which duels with victims.
    pub(crate) fn duels(&self) -> bool {
        matches!(self, Admitter::TinyLfu(_))
    }

    /// TinyLFU's duel: should `candidate` replace `victim`?
    pub(crate) fn admit_over(&mut self, candidate: u64, victim: u64) -> bool {
        match self {
            Admitter::TinyLfu(sketch) => sketch.admit(candidate, victim),
            _ => true,
        }
    }

    /// Keys the doorkeeper remembers (0 for the other rules).
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        match self {
            Admitter::SecondHit { current, previous, .. } => current.len() + previous.len(),
            _ => 0,
        }
    }
}

/// The id admission uses for a primary key.
pub(crate) fn key_id(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_hit_admits_the_second_attempt_within_the_window() {
        let mut a = Admitter::new(AdmissionRule::SecondHit { window: 4 });
        assert!(!a.passes_doorkeeper(1));
        assert!(a.passes_doorkeeper(1));
        assert!(!a.passes_doorkeeper(1), "admitted keys are forgotten");
        for k in 10..20 {
            assert!(!a.passes_doorkeeper(k));
            assert!(a.remembered() <= 4, "bounded");
        }
        assert!(!a.passes_doorkeeper(1), "pushed out of the window");
    }

    #[test]
    fn always_and_tinylfu_have_no_doorkeeper() {
        assert!(Admitter::new(AdmissionRule::Always).passes_doorkeeper(1));
        let mut t = Admitter::new(AdmissionRule::TinyLfu { expected: 100 });
        assert!(t.passes_doorkeeper(1));
        for _ in 0..5 {
            t.record(7);
        }
        assert!(t.admit_over(7, 8));
        assert!(!t.admit_over(8, 7));
    }
}
