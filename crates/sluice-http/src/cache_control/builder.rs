//! Folding individual directives into a [`CacheControl`], with the merge rules its doc
//! comment states for repeated and invalid values.

use super::{CacheControl, MaxStale};
use crate::parse::{parse_delta_seconds_arg, DELTA_SECONDS_MAX};
use crate::sf;

/// A numeric directive value as read from the field: valid, invalid, or a bare name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    Absent,
    Number(u64),
    Invalid,
}

#[derive(Debug, Default)]
pub(super) struct Builder {
    cc: CacheControl,
    /// Set when some occurrence of the directive was invalid: it is then dropped entirely.
    bad_max_stale: bool,
    bad_swr: bool,
    bad_sie: bool,
}

impl Builder {
    /// Applies one `Cache-Control` directive; `name` is already lowercased.
    pub fn apply(&mut self, name: &[u8], raw_value: Option<&[u8]>) {
        let arg = match raw_value {
            None => Arg::Absent,
            Some(raw) => parse_delta_seconds_arg(raw).map_or(Arg::Invalid, Arg::Number),
        };
        self.apply_arg(name, arg, true);
    }

    /// Applies one member of a targeted field's Structured Field Dictionary (RFC 9213 §2.1).
    pub fn apply_structured(&mut self, name: &[u8], value: sf::Value) {
        let arg = match value {
            sf::Value::Boolean(false) => return,
            sf::Value::Boolean(true) => Arg::Absent,
            sf::Value::Integer(n) => u64::try_from(n).map_or(Arg::Invalid, |n| Arg::Number(n.min(DELTA_SECONDS_MAX))),
            sf::Value::Other => Arg::Invalid,
        };
        // Dictionary keys are unique, so a repeated directive cannot reach this point.
        self.apply_arg(name, arg, false);
    }

    fn apply_arg(&mut self, name: &[u8], arg: Arg, repeats_conflict: bool) {
        let cc = &mut self.cc;
        match name {
            b"max-age" => once_or_stale(&mut cc.max_age, arg, repeats_conflict),
            b"s-maxage" => once_or_stale(&mut cc.s_maxage, arg, repeats_conflict),
            b"min-fresh" => {
                if let Arg::Number(n) = arg {
                    cc.min_fresh = Some(cc.min_fresh.map_or(n, |m| m.max(n)));
                }
            }
            b"max-stale" => match arg {
                Arg::Absent => cc.max_stale = Some(cc.max_stale.unwrap_or(MaxStale::Any)),
                Arg::Number(n) => {
                    let n = match cc.max_stale {
                        Some(MaxStale::Seconds(m)) => m.min(n),
                        _ => n,
                    };
                    cc.max_stale = Some(MaxStale::Seconds(n));
                }
                Arg::Invalid => self.bad_max_stale = true,
            },
            b"stale-while-revalidate" => smallest_or_bad(&mut cc.stale_while_revalidate, &mut self.bad_swr, arg),
            b"stale-if-error" => smallest_or_bad(&mut cc.stale_if_error, &mut self.bad_sie, arg),
            // Qualified forms (`no-cache="f"`, `private="f"`) count as unqualified, and an
            // argument to any other flag is ignored.
            b"no-cache" => cc.no_cache = true,
            b"no-store" => cc.no_store = true,
            b"no-transform" => cc.no_transform = true,
            b"only-if-cached" => cc.only_if_cached = true,
            b"must-revalidate" => cc.must_revalidate = true,
            b"proxy-revalidate" => cc.proxy_revalidate = true,
            b"must-understand" => cc.must_understand = true,
            b"private" => cc.private = true,
            b"public" => cc.public = true,
            b"immutable" => cc.immutable = true,
            // Unknown extension directives are ignored (§5.2.3).
            _ => {}
        }
    }

    pub fn finish(mut self) -> CacheControl {
        if self.bad_max_stale {
            self.cc.max_stale = None;
        }
        if self.bad_swr {
            self.cc.stale_while_revalidate = None;
        }
        if self.bad_sie {
            self.cc.stale_if_error = None;
        }
        self.cc
    }
}

/// `max-age`/`s-maxage`: a missing or invalid value, or (for `Cache-Control`) a second
/// occurrence, reads as `0`, i.e. stale (RFC 9111 §4.2.1).
fn once_or_stale(slot: &mut Option<u64>, arg: Arg, repeats_conflict: bool) {
    let value = match arg {
        Arg::Number(n) => n,
        Arg::Absent | Arg::Invalid => 0,
    };
    *slot = Some(if repeats_conflict && slot.is_some() { 0 } else { value });
}

/// `stale-while-revalidate`/`stale-if-error` (RFC 5861): the smallest valid value wins; a
/// missing or invalid value poisons the directive.
fn smallest_or_bad(slot: &mut Option<u64>, bad: &mut bool, arg: Arg) {
    match arg {
        Arg::Number(n) => *slot = Some(slot.map_or(n, |m| m.min(n))),
        Arg::Absent | Arg::Invalid => *bad = true,
    }
}
