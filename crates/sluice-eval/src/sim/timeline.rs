//! Per-request hit/miss bits of one run (the seed paper's "run time behaviour").

/// One bit per request: set on a hit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    bits: Vec<u64>,
    len: usize,
}

impl Timeline {
    /// All-miss timeline of `len` requests.
    pub fn new(len: usize) -> Self {
        Self { bits: vec![0; len.div_ceil(64)], len }
    }

    /// Marks request `i` as a hit.
    #[inline]
    pub fn set_hit(&mut self, i: usize) {
        self.bits[i / 64] |= 1 << (i % 64);
    }

    /// True when request `i` hit.
    pub fn is_hit(&self, i: usize) -> bool {
        self.bits[i / 64] >> (i % 64) & 1 == 1
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty trace.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Requests that hit here but miss in `other` (same trace): with `other` a bigger cache,
    /// these are the requests a stack algorithm could never lose.
    pub fn hits_missed_by(&self, other: &Timeline) -> u64 {
        self.bits.iter().zip(&other.bits).map(|(a, b)| u64::from((a & !b).count_ones())).sum()
    }

    /// Misses among requests `range`.
    pub fn misses_in(&self, range: std::ops::Range<usize>) -> usize {
        range.filter(|&i| !self.is_hit(i)).count()
    }
}
