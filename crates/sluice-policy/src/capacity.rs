//! What "full" means: a byte budget or an object count, and the configuration every policy
//! constructor takes.

/// The cache's size limit. The caller accounts residents with [`Capacity::weight`] and evicts
/// while `used + weight(size) > limit()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capacity {
    /// At most this many objects, whatever their size (the seed paper's "number of URLs").
    Objects(u64),
    /// At most this many bytes of object bodies.
    Bytes(u64),
}

impl Capacity {
    /// The limit in the capacity's own unit (objects or bytes).
    pub fn limit(self) -> u64 {
        match self {
            Capacity::Objects(n) | Capacity::Bytes(n) => n,
        }
    }

    /// How much of [`Capacity::limit`] an object of `size` bytes uses: 1 for
    /// [`Capacity::Objects`], `size` for [`Capacity::Bytes`].
    pub fn weight(self, size: u64) -> u64 {
        match self {
            Capacity::Objects(_) => 1,
            Capacity::Bytes(_) => size,
        }
    }

    /// `share` (0.0 to 1.0) of the limit, rounded down but at least 1 when the limit is
    /// non-zero. Policies size their internal queues with it.
    pub(crate) fn share(self, share: f64) -> u64 {
        let limit = self.limit();
        if limit == 0 {
            return 0;
        }
        ((limit as f64 * share) as u64).clamp(1, limit)
    }
}

/// Everything a policy constructor needs. Build with [`PolicyConfig::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyConfig {
    /// The limit the caller enforces; policies with internal queues size them from it.
    pub capacity: Capacity,
    /// Seed of every random choice a policy makes (RAND, sampling). Same seed, same run.
    pub seed: u64,
}

impl PolicyConfig {
    /// A configuration with `capacity` and seed 0.
    pub fn new(capacity: Capacity) -> Self {
        Self { capacity, seed: 0 }
    }

    /// The same configuration with another seed.
    pub fn with_seed(self, seed: u64) -> Self {
        Self { seed, ..self }
    }
}
