//! Secondary cache keys from `Vary`, RFC 9111 §4.1.

use http::header::{HeaderMap, HeaderName};

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
        let _ = response;
        todo!()
    }
}

/// The normalised values, in `fields` order, of the request fields a response varies on:
/// `None` for an absent field; present lines joined with `,` and whitespace around commas
/// and at the ends removed. Two requests match a stored response when their keys are equal.
pub type VaryKey = Vec<Option<String>>;

/// Computes the [`VaryKey`] of `request` for `fields`.
pub fn vary_key(fields: &[HeaderName], request: &HeaderMap) -> VaryKey {
    let _ = (fields, request);
    todo!()
}
