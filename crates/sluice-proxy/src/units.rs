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

/// Reads a number or a string with a unit; `what` names the expected form in errors.
struct UnitVisitor<T> {
    what: &'static str,
    from_number: fn(u64) -> T,
    from_text: fn(&str) -> Result<T, String>,
}

impl<T> de::Visitor<'_> for UnitVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<T, E> {
        Ok((self.from_number)(n))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
        u64::try_from(n).map(self.from_number).map_err(|_| E::invalid_value(de::Unexpected::Signed(n), &self))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        (self.from_text)(text).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UnitVisitor {
            what: "a size: a number of bytes, or a string with a unit such as \"256MiB\"",
            from_number: Size,
            from_text: |t| parse_size(t).map(Size),
        })
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UnitVisitor {
            what: "a duration: a number of seconds, or a string with a unit such as \"250ms\" or \"1h\"",
            from_number: |n| Dur(Duration::from_secs(n)),
            from_text: |t| parse_duration(t).map(Dur),
        })
    }
}

/// Sizes are written back in the largest binary unit they are a whole number of
/// (`"256MiB"`), or as bytes.
impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const UNITS: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        match UNITS.iter().find(|(factor, _)| self.0 > 0 && self.0.is_multiple_of(*factor)) {
            Some((factor, unit)) => s.serialize_str(&format!("{}{unit}", self.0 / factor)),
            None => s.serialize_u64(self.0),
        }
    }
}

/// Durations are written back in the largest unit they are a whole number of (`"1h"`,
/// `"250ms"`).
impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const UNITS: [(u128, &str); 4] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")];
        let ms = self.0.as_millis();
        match UNITS.iter().find(|(factor, _)| ms.is_multiple_of(*factor)) {
            Some(_) if ms == 0 => s.serialize_str("0s"),
            Some((factor, unit)) => s.serialize_str(&format!("{}{unit}", ms / factor)),
            None => s.serialize_str(&format!("{ms}ms")),
        }
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

    #[derive(Debug, Deserialize, Serialize)]
    struct Both {
        size: Size,
        dur: Dur,
    }

    #[test]
    fn values_are_written_back_in_their_largest_whole_unit_and_read_back_alike() {
        let cases = [
            (256 << 20, "\"256MiB\"", 3_600_000, "\"1h\""),
            (1000, "1000", 250, "\"250ms\""),
            (0, "0", 0, "\"0s\""),
            (3 << 10, "\"3KiB\"", 90_000, "\"90s\""),
        ];
        for (bytes, size_text, ms, dur_text) in cases {
            let both = Both { size: Size(bytes), dur: Dur(Duration::from_millis(ms)) };
            let text = toml::to_string(&both).unwrap();
            assert_eq!(text, format!("size = {size_text}\ndur = {dur_text}\n"));
            let back: Both = toml::from_str(&text).unwrap();
            assert_eq!((back.size, back.dur), (both.size, both.dur));
        }
    }

    #[test]
    fn wrong_types_say_what_is_expected() {
        let err = toml::from_str::<Both>("size = -5\ndur = 1\n").unwrap_err().to_string();
        assert!(err.contains("expected a size: a number of bytes, or a string with a unit"), "{err}");
        let err = toml::from_str::<Both>("size = 1\ndur = true\n").unwrap_err().to_string();
        assert!(err.contains("expected a duration"), "{err}");
    }
}
