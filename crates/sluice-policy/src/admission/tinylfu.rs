//! TinyLFU: admit a newcomer only if it has been requested more often than the victim,
//! judged by an approximate, periodically halved frequency sketch.
//!
//! **Algorithm.** A count-min sketch of 4 rows of 4-bit counters (16 per `u64` word)
//! estimates each id's recent request count as the minimum of its 4 counters; a record
//! increments only the counters that equal that minimum (conservative update). After
//! `10 × width` records every counter is halved, so the sketch tracks recent popularity.
//! `admit(candidate, victim)` is `estimate(candidate) > estimate(victim)`. There is no
//! doorkeeper Bloom filter: the 4-bit counters already cap the cost of one-hit wonders.
//!
//! **Paper.** G. Einziger, R. Friedman, B. Manes, "TinyLFU: a highly efficient cache
//! admission policy", ACM Transactions on Storage 13(4), 2017.
//!
//! **Complexity.** `record`, `admit`: O(1) (4 counters each). Halving: O(width) every
//! `10 × width` records, O(1) amortised. `reserve`: O(width) when it grows.
//!
//! **Memory.** 4 rows × 4 bits = 2 bytes per sketch column; the width is the next power of
//! two at or above the resident count.

use crate::hash::mix;
use crate::ObjectId;

use super::Admission;

const ROWS: usize = 4;
const MIN_WIDTH: usize = 64;
const ROW_SEEDS: [u64; ROWS] =
    [0x97d7_2b1e_c3a9_4f1d, 0x3c6e_f372_fe94_f82b, 0xa54f_f53a_5f1d_36f1, 0x510e_527f_ade6_82d1];

/// TinyLFU frequency sketch and admission rule.
pub struct TinyLfu {
    /// `ROWS` rows of `width` 4-bit counters, row-major, 16 counters per word.
    table: Vec<u64>,
    width: usize,
    records: usize,
}

impl TinyLfu {
    /// A sketch sized for about `expected` resident objects (it grows with
    /// [`Admission::reserve`]).
    pub fn new(expected: usize) -> Self {
        let width = expected.max(MIN_WIDTH).next_power_of_two();
        Self { table: vec![0; ROWS * width / 16], width, records: 0 }
    }

    /// Estimated recent request count of `id` (0 to 15).
    pub fn estimate(&self, id: ObjectId) -> u8 {
        (0..ROWS).map(|r| self.counter(r, id)).min().unwrap_or(0)
    }

    fn slot(&self, row: usize, id: ObjectId) -> (usize, u32) {
        let col = (mix(id ^ ROW_SEEDS[row]) as usize) & (self.width - 1);
        let word = row * self.width / 16 + col / 16;
        (word, (col % 16) as u32 * 4)
    }

    fn counter(&self, row: usize, id: ObjectId) -> u8 {
        let (word, shift) = self.slot(row, id);
        ((self.table[word] >> shift) & 0xf) as u8
    }

    fn halve(&mut self) {
        for w in &mut self.table {
            *w = (*w >> 1) & 0x7777_7777_7777_7777;
        }
        self.records /= 2;
    }
}

impl Admission for TinyLfu {
    fn record(&mut self, id: ObjectId) {
        let min = self.estimate(id);
        if min < 15 {
            for row in 0..ROWS {
                let (word, shift) = self.slot(row, id);
                if (self.table[word] >> shift) & 0xf == u64::from(min) {
                    self.table[word] += 1 << shift;
                }
            }
        }
        self.records += 1;
        if self.records >= 10 * self.width {
            self.halve();
        }
    }

    fn admit(&mut self, candidate: ObjectId, victim: ObjectId) -> bool {
        self.estimate(candidate) > self.estimate(victim)
    }

    fn reserve(&mut self, resident: usize) {
        if resident > self.width {
            *self = Self::new(resident);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequent_ids_win_and_counts_age() {
        let mut s = TinyLfu::new(64);
        for _ in 0..5 {
            s.record(1);
        }
        s.record(2);
        assert_eq!(s.estimate(1), 5);
        assert!(s.admit(1, 2));
        assert!(!s.admit(2, 1));
        assert!(!s.admit(3, 2), "an unseen candidate never beats a seen victim");
        for _ in 0..(10 * 64) {
            s.record(2);
        }
        assert_eq!(s.estimate(1), 2, "halving ages old counts (5 -> 2)");
    }

    #[test]
    fn counters_saturate_at_15() {
        let mut s = TinyLfu::new(64);
        for _ in 0..40 {
            s.record(7);
        }
        assert_eq!(s.estimate(7), 15);
    }
}
