//! The one table of policies: names, labels, one-line summaries and constructors.

use std::fmt;

use crate::policies::{Arc, Fifo, Gdsf, Lfu, LfuDa, Lru, Maxs, Rand, S3Fifo, Sieve, WTinyLfu};
use crate::{Policy, PolicyConfig};

/// One registered policy.
#[derive(Debug)]
pub struct PolicyInfo {
    /// Canonical name, lower case (what [`build`] and `sluice sim --policies` accept).
    pub name: &'static str,
    /// Display label for tables and plots.
    pub label: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    constructor: fn(&PolicyConfig) -> Box<dyn Policy>,
}

impl PolicyInfo {
    /// A new, empty instance of this policy.
    pub fn build(&self, config: &PolicyConfig) -> Box<dyn Policy> {
        (self.constructor)(config)
    }
}

/// Every policy [`build`] knows, in the order tables and plots list them.
pub static POLICIES: &[PolicyInfo] = &[
    PolicyInfo { name: "lru", label: "LRU", summary: "least recently used", constructor: |c| Box::new(Lru::new(c)) },
    PolicyInfo {
        name: "lfu",
        label: "LFU",
        summary: "least frequently used, least recently used among equals",
        constructor: |c| Box::new(Lfu::new(c)),
    },
    PolicyInfo { name: "fifo", label: "FIFO", summary: "first in, first out", constructor: |c| Box::new(Fifo::new(c)) },
    PolicyInfo {
        name: "rand",
        label: "RAND",
        summary: "uniformly random victim (seeded)",
        constructor: |c| Box::new(Rand::new(c)),
    },
    PolicyInfo {
        name: "maxs",
        label: "MAXS",
        summary: "largest object first",
        constructor: |c| Box::new(Maxs::new(c)),
    },
    PolicyInfo {
        name: "gdsf",
        label: "GDSF",
        summary: "greedy-dual-size-frequency: lowest L + frequency / size",
        constructor: |c| Box::new(Gdsf::new(c)),
    },
    PolicyInfo {
        name: "lfu-da",
        label: "LFU-DA",
        summary: "LFU with dynamic aging: lowest L + frequency",
        constructor: |c| Box::new(LfuDa::new(c)),
    },
    PolicyInfo {
        name: "s3-fifo",
        label: "S3-FIFO",
        summary: "small, main and ghost FIFO queues; promote on one hit in small",
        constructor: |c| Box::new(S3Fifo::new(c)),
    },
    PolicyInfo {
        name: "sieve",
        label: "SIEVE",
        summary: "FIFO with visited bits and a sweeping hand",
        constructor: |c| Box::new(Sieve::new(c)),
    },
    PolicyInfo {
        name: "arc",
        label: "ARC",
        summary: "adaptive replacement cache: recency and frequency lists tuned by ghosts",
        constructor: |c| Box::new(Arc::new(c)),
    },
    PolicyInfo {
        name: "w-tinylfu",
        label: "W-TinyLFU",
        summary: "1% LRU window, TinyLFU admission, segmented LRU main",
        constructor: |c| Box::new(WTinyLfu::new(c)),
    },
];

/// Canonical names of every policy, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().map(|p| p.name)
}

/// Looks a policy up by name; case, `-` and `_` are ignored (`S3FIFO`, `lfu_da` work).
pub fn describe(name: &str) -> Option<&'static PolicyInfo> {
    let wanted = normalize(name);
    POLICIES.iter().find(|p| normalize(p.name) == wanted)
}

/// Builds the policy called `name` (see [`describe`] for the matching rule).
///
/// # Errors
/// [`UnknownPolicy`], whose message lists the valid names, when no policy matches.
pub fn build(name: &str, config: &PolicyConfig) -> Result<Box<dyn Policy>, UnknownPolicy> {
    describe(name).map(|p| p.build(config)).ok_or_else(|| UnknownPolicy { name: name.to_owned() })
}

fn normalize(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, '-' | '_')).flat_map(char::to_lowercase).collect()
}

/// No policy has the requested name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy {
    /// The name that was asked for.
    pub name: String,
}

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown policy {:?}; valid names: ", self.name)?;
        for (i, name) in names().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownPolicy {}
