//! What can be simulated: a registered online policy or one of the Belady oracles.

use std::fmt;

use sluice_policy::{describe, PolicyInfo, POLICIES};

use super::Unit;

/// One line of a results table.
#[derive(Clone, Copy, Debug)]
pub enum Contender {
    /// An online policy from the `sluice-policy` registry.
    Policy(&'static PolicyInfo),
    /// Belady's optimum with bypass; exact when every object weighs 1.
    Belady,
    /// The byte-aware Belady-size heuristic (not an optimum).
    BeladySize,
}

impl Contender {
    /// Canonical name (as accepted by [`Contender::parse`]).
    pub fn name(&self) -> &'static str {
        match self {
            Contender::Policy(p) => p.name,
            Contender::Belady => "belady",
            Contender::BeladySize => "belady-size",
        }
    }

    /// Label for tables and plots; the oracles say what they are.
    pub fn label(&self) -> &'static str {
        match self {
            Contender::Policy(p) => p.label,
            Contender::Belady => "Belady (OPT)",
            Contender::BeladySize => "Belady-size (heuristic)",
        }
    }

    /// True for the offline oracles (they need the future; plots draw them dashed).
    pub fn is_oracle(&self) -> bool {
        !matches!(self, Contender::Policy(_))
    }

    /// Looks up one name: a policy (see `sluice_policy::describe`), `belady` or
    /// `belady-size`.
    ///
    /// # Errors
    /// [`UnknownContender`], whose message lists every valid name.
    pub fn parse(name: &str) -> Result<Self, UnknownContender> {
        let n = name.trim().to_ascii_lowercase().replace('_', "-");
        match n.as_str() {
            "belady" | "opt" | "min" => Ok(Contender::Belady),
            "belady-size" | "beladysize" => Ok(Contender::BeladySize),
            _ => describe(&n).map(Contender::Policy).ok_or_else(|| UnknownContender(name.trim().to_owned())),
        }
    }

    /// Parses a comma-separated list; `all` expands to every online policy and Belady (and
    /// Belady-size when `unit` is bytes, where it differs from Belady). Duplicates are
    /// dropped, order is kept.
    ///
    /// # Errors
    /// The first unknown name.
    pub fn parse_list(spec: &str, unit: Unit) -> Result<Vec<Self>, UnknownContender> {
        let mut out: Vec<Contender> = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let items = if part.eq_ignore_ascii_case("all") { Self::all(unit) } else { vec![Self::parse(part)?] };
            for c in items {
                if !out.iter().any(|o| o.name() == c.name()) {
                    out.push(c);
                }
            }
        }
        if out.is_empty() {
            return Err(UnknownContender(spec.to_owned()));
        }
        Ok(out)
    }

    /// Every online policy, then Belady (and Belady-size for byte capacities).
    pub fn all(unit: Unit) -> Vec<Self> {
        let mut v: Vec<Contender> = POLICIES.iter().map(Contender::Policy).collect();
        v.push(Contender::Belady);
        if unit == Unit::Bytes {
            v.push(Contender::BeladySize);
        }
        v
    }
}

/// A policy name nobody knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownContender(pub String);

impl fmt::Display for UnknownContender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown policy {:?}; valid names: all, ", self.0)?;
        for p in POLICIES {
            write!(f, "{}, ", p.name)?;
        }
        f.write_str("belady, belady-size")
    }
}

impl std::error::Error for UnknownContender {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_expand_and_errors_list_names() {
        let v = Contender::parse_list("lru, all ,S3FIFO", Unit::Objects).unwrap();
        assert_eq!(v.first().map(Contender::name), Some("lru"));
        assert_eq!(v.len(), POLICIES.len() + 1);
        assert!(v.iter().any(|c| c.name() == "belady") && !v.iter().any(|c| c.name() == "belady-size"));
        let e = Contender::parse_list("lru,nope", Unit::Bytes).unwrap_err().to_string();
        assert!(e.contains("\"nope\"") && e.contains("sieve") && e.contains("belady-size"), "{e}");
    }
}
