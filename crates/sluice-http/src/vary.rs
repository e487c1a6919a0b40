//! Secondary cache keys from `Vary`, RFC 9111 §4.1.

use crate::parse::{list_members, trim_ows};
use http::header::{HeaderMap, HeaderName, ACCEPT_ENCODING, ACCEPT_LANGUAGE, COOKIE, VARY};

/// A response's `Vary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Vary {
    /// No `Vary` (or an empty one).
    None,
    /// `Vary: *` (alone or within a list): never matches.
    Star,
    /// The listed field names, lowercased, deduplicated, in first-seen order, over all lines.
    Fields(Vec<HeaderName>),
}

impl Vary {
    /// Parses all `Vary` lines of a response. Invalid field names make it `Star`
    /// (conservative: such a response is never reused).
    pub fn from_headers(response: &HeaderMap) -> Self {
        let mut fields: Vec<HeaderName> = Vec::new();
        for member in list_members(response, &VARY) {
            if member == b"*" {
                return Vary::Star;
            }
            // `from_bytes` lowercases and rejects anything that is not a token.
            let Ok(name) = HeaderName::from_bytes(member) else {
                return Vary::Star;
            };
            if !fields.contains(&name) {
                fields.push(name);
            }
        }
        if fields.is_empty() {
            Vary::None
        } else {
            Vary::Fields(fields)
        }
    }
}

/// The normalised values, in `fields` order, of the request fields a response varies on:
/// `None` for an absent field; present lines joined with `,` and whitespace around commas
/// and at the ends removed; `Accept-Language` and `Accept-Encoding`, whose language ranges
/// and content codings are case-insensitive (RFC 4647 §2, RFC 9110 §8.4.1), lowercased (the
/// case normalisation §4.1 allows); and `Accept-Encoding`'s members, whose order means
/// nothing, sorted with their weights in one form (`codings.rs`). Other values keep their
/// case. Two requests match a stored response when their keys are equal.
///
/// Bytes that are not printable ASCII (obs-text, HTAB inside a value) and the backslash are
/// escaped as `\xNN` / `\\`, so that distinct field values always give distinct keys.
pub type VaryKey = Vec<Option<String>>;

/// Computes the [`VaryKey`] of `request` for `fields`.
pub fn vary_key(fields: &[HeaderName], request: &HeaderMap) -> VaryKey {
    fields.iter().map(|name| normalised_value(request, name)).collect()
}

fn normalised_value(request: &HeaderMap, name: &HeaderName) -> Option<String> {
    let mut lines = request.get_all(name).iter().peekable();
    lines.peek()?;
    if name == COOKIE {
        return Some(cookie_pairs(lines));
    }
    let mut joined = Vec::new();
    for (i, line) in lines.enumerate() {
        if i > 0 {
            joined.push(b',');
        }
        joined.extend_from_slice(line.as_bytes());
    }
    if name == ACCEPT_LANGUAGE || name == ACCEPT_ENCODING {
        joined.make_ascii_lowercase();
    }
    if name == ACCEPT_ENCODING {
        if let Some(canonical) = codings::canonical_codings(&joined) {
            return Some(canonical);
        }
    }
    let mut out = String::with_capacity(joined.len());
    for (i, piece) in joined.split(|&b| b == b',').enumerate() {
        if i > 0 {
            out.push(',');
        }
        escape_into(&mut out, trim_ows(piece));
    }
    Some(out)
}

/// `Cookie` is no comma list: its lines are crumbs of one `; `-separated list (RFC 9113
/// §8.2.3, RFC 6265 §5.4), which an HTTP/2 client may send one pair per field line. The
/// pairs, in order, whatever lines they came in.
fn cookie_pairs<'a>(lines: impl Iterator<Item = &'a http::HeaderValue>) -> String {
    let mut out = String::new();
    for pair in lines.flat_map(|line| line.as_bytes().split(|&b| b == b';')).map(trim_ows).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push_str("; ");
        }
        escape_into(&mut out, pair);
    }
    out
}

fn escape_into(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b' '..=b'~' => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
}

mod codings;

#[cfg(test)]
mod tests;
