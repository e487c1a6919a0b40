//! Cache sizes as given on the command line: absolute, or a percentage of the trace.

use std::fmt;
use std::str::FromStr;

use sluice_policy::Capacity;

use crate::trace::Trace;

/// What a cache size counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Objects (URLs), whatever their size: the seed paper's setting.
    Objects,
    /// Bytes of object bodies.
    Bytes,
}

impl FromStr for Unit {
    type Err = SizeError;

    fn from_str(s: &str) -> Result<Self, SizeError> {
        match s.to_ascii_lowercase().as_str() {
            "objects" | "object" | "count" | "urls" => Ok(Unit::Objects),
            "bytes" | "byte" => Ok(Unit::Bytes),
            _ => Err(SizeError(format!("unknown unit {s:?}; valid units: objects, bytes"))),
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Objects => "objects",
            Unit::Bytes => "bytes",
        })
    }
}

/// One requested cache size.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSpec {
    /// Percent of the trace's distinct objects (unit objects) or of their bytes (unit bytes).
    Percent(f64),
    /// An absolute number of objects, or of bytes.
    Absolute(u64),
    /// Bytes written with a unit suffix (`64MiB`): only valid with [`Unit::Bytes`].
    Bytes(u64),
}

impl SizeSpec {
    /// Parses a comma-separated list such as `10%,20%,1000` or `1MiB,64MiB`.
    ///
    /// # Errors
    /// The first entry that is not a size.
    pub fn parse_list(spec: &str) -> Result<Vec<Self>, SizeError> {
        spec.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::parse).collect()
    }

    /// The capacity this size means for `trace` counted in `unit`. Percentages round to the
    /// nearest whole object or byte, at least 1.
    ///
    /// # Errors
    /// A byte-suffixed size with [`Unit::Objects`].
    pub fn resolve(&self, trace: &Trace, unit: Unit) -> Result<Capacity, SizeError> {
        let total = match unit {
            Unit::Objects => trace.objects,
            Unit::Bytes => trace.object_bytes,
        };
        let n = match *self {
            SizeSpec::Percent(p) => ((total as f64 * p / 100.0).round() as u64).max(1),
            SizeSpec::Absolute(n) => n,
            SizeSpec::Bytes(n) if unit == Unit::Bytes => n,
            SizeSpec::Bytes(_) => {
                return Err(SizeError(format!("{self} is a byte size; use --unit bytes or a plain count")))
            }
        };
        Ok(match unit {
            Unit::Objects => Capacity::Objects(n),
            Unit::Bytes => Capacity::Bytes(n),
        })
    }
}

impl FromStr for SizeSpec {
    type Err = SizeError;

    fn from_str(s: &str) -> Result<Self, SizeError> {
        let bad = || SizeError(format!("bad cache size {s:?}; expected e.g. 10%, 5000 or 64MiB"));
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(p > 0.0 && p.is_finite()) {
                return Err(bad());
            }
            return Ok(SizeSpec::Percent(p));
        }
        if let Ok(n) = s.parse::<u64>() {
            return if n == 0 { Err(bad()) } else { Ok(SizeSpec::Absolute(n)) };
        }
        let split = s.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(bad)?;
        let (num, suffix) = s.split_at(split);
        let num: f64 = num.trim().parse().map_err(|_| bad())?;
        let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
            "b" => 1,
            "k" | "kb" => 1000,
            "kib" => 1 << 10,
            "m" | "mb" => 1_000_000,
            "mib" => 1 << 20,
            "g" | "gb" => 1_000_000_000,
            "gib" => 1 << 30,
            "t" | "tb" => 1_000_000_000_000,
            "tib" => 1 << 40,
            _ => return Err(bad()),
        };
        let n = (num * mult as f64).round();
        if !(n >= 1.0 && n < u64::MAX as f64) {
            return Err(bad());
        }
        Ok(SizeSpec::Bytes(n as u64))
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSpec::Percent(p) => write!(f, "{p}%"),
            SizeSpec::Absolute(n) => write!(f, "{n}"),
            SizeSpec::Bytes(n) => write!(f, "{}", crate::report::human_bytes(*n)),
        }
    }
}

/// A cache size or unit that makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SizeError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_resolves() {
        let v = SizeSpec::parse_list("10%, 250,1.5KiB,2MB").unwrap();
        assert_eq!(
            v,
            vec![SizeSpec::Percent(10.0), SizeSpec::Absolute(250), SizeSpec::Bytes(1536), SizeSpec::Bytes(2_000_000)]
        );
        let t = Trace { objects: 1234, object_bytes: 10_000, ..Trace::default() };
        assert_eq!(v[0].resolve(&t, Unit::Objects), Ok(Capacity::Objects(123)));
        assert_eq!(v[0].resolve(&t, Unit::Bytes), Ok(Capacity::Bytes(1000)));
        assert!(v[2].resolve(&t, Unit::Objects).is_err());
        for bad in ["0", "-5%", "10 parsecs", "%", "0%"] {
            assert!(bad.parse::<SizeSpec>().is_err(), "{bad}");
        }
    }
}
