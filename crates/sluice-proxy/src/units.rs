//! Human-friendly sizes (`256MiB`) and durations (`10s`) for the config file.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A size in bytes, written as an integer or with a unit: `B`, `KB`/`KiB`, `MB`/`MiB`,
/// `GB`/`GiB` (`KB` is 1000 bytes, `KiB` 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

/// A duration, written as seconds (an integer) or with a unit: `ms`, `s`, `m`, `h`, `d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

/// Parses `"256MiB"`, `"1.5 GB"`, `"4096"`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_number(text)?;
    let factor: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1e12,
        "tib" => 1024f64.powi(4),
        other => return Err(format!("unknown size unit `{other}` in `{text}` (use B, KB, KiB, MB, MiB, GB, GiB)")),
    };
    Ok((number * factor).round() as u64)
}

/// Parses `"10s"`, `"250ms"`, `"2m"`, `"1h"`, `"1d"`, `"30"` (seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = split_number(text)?;
    let secs = match unit {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        "d" => number * 86400.0,
        other => return Err(format!("unknown duration unit `{other}` in `{text}` (use ms, s, m, h, d)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

fn split_number(text: &str) -> Result<(f64, &str), String> {
    let text = text.trim();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let number: f64 = text[..end].parse().map_err(|_| format!("`{text}` does not start with a number"))?;
    if !number.is_finite() || number < 0.0 {
        return Err(format!("`{text}` is not a non-negative number"));
    }
    Ok((number, text[end..].trim()))
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) => Ok(Size(n)),
            NumberOrText::Text(t) => parse_size(&t).map(Size).map_err(de::Error::custom),
        }
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) => Ok(Dur(Duration::from_secs(n))),
            NumberOrText::Text(t) => parse_duration(&t).map(Dur).map_err(de::Error::custom),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", self.0.as_millis()))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_binary_and_decimal_units() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1 KB"), Ok(1000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 parsecs").unwrap_err().contains("unknown size unit"));
    }

    #[test]
    fn durations_accept_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("soon").is_err());
    }
}
