//! The field names of the response heads an origin connection has carried, to reuse.
//!
//! An origin answers with the same fields in the same order, response after response
//! (`Server`, `Date`, `Content-Type`, ...). Turning a field name's bytes into a
//! [`HeaderName`] costs about 200 instructions (a lookup among the standard names, or a
//! lower-cased copy); comparing the bytes with the name at the same position in the previous
//! head costs a tenth of that. [`FieldNames`] keeps, per connection, the names of the last
//! head it parsed, by position.

use http::header::HeaderName;

/// The most positions remembered; fields past them are converted each time.
const REMEMBERED: usize = 32;

/// The field names of the last response head read on one connection, by position.
#[derive(Debug, Default)]
pub struct FieldNames {
    /// The name's bytes exactly as the origin sent them, and the name they gave.
    seen: Vec<(Box<[u8]>, HeaderName)>,
}

impl FieldNames {
    /// The name of the field at `position` in the head being parsed, whose bytes are `raw`:
    /// the remembered one when the previous head had the same bytes there, else converted
    /// (and remembered). `None` when `raw` is not a valid field name.
    ///
    /// The answer is the one [`HeaderName::from_bytes`] gives: a name is reused only for the
    /// very bytes it was made from.
    #[inline]
    pub fn name(&mut self, position: usize, raw: &[u8]) -> Option<HeaderName> {
        match self.seen.get(position) {
            Some((bytes, name)) if **bytes == *raw => Some(name.clone()),
            _ => self.convert(position, raw),
        }
    }

    /// [`Self::name`] for bytes not remembered at `position`; out of line, so that the
    /// common case stays small.
    #[inline(never)]
    fn convert(&mut self, position: usize, raw: &[u8]) -> Option<HeaderName> {
        let name = HeaderName::from_bytes(raw).ok()?;
        if position < self.seen.len() {
            self.seen[position] = (raw.into(), name.clone());
        } else if position == self.seen.len() && position < REMEMBERED {
            self.seen.push((raw.into(), name.clone()));
        }
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_reused_by_position_and_replaced_when_the_bytes_differ() {
        let mut names = FieldNames::default();
        assert_eq!(names.name(0, b"Content-Type").unwrap(), http::header::CONTENT_TYPE);
        assert_eq!(names.name(1, b"X-Custom").unwrap(), "x-custom");
        // The same bytes at the same place: the remembered names.
        assert_eq!(names.name(0, b"Content-Type").unwrap(), http::header::CONTENT_TYPE);
        assert_eq!(names.name(1, b"X-Custom").unwrap(), "x-custom");
        // Other bytes at a remembered place: converted, and remembered instead.
        assert_eq!(names.name(0, b"ETag").unwrap(), http::header::ETAG);
        assert_eq!(names.seen[0].1, http::header::ETAG);
        // Case differs: a different byte string, the same name.
        assert_eq!(names.name(1, b"x-custom").unwrap(), "x-custom");
        assert_eq!(&*names.seen[1].0, b"x-custom");
    }

    #[test]
    fn invalid_names_are_refused_and_not_remembered() {
        let mut names = FieldNames::default();
        assert!(names.name(0, b"Bad Name").is_none());
        assert!(names.seen.is_empty());
    }

    #[test]
    fn at_most_a_bounded_number_of_positions_is_remembered() {
        let mut names = FieldNames::default();
        for i in 0..REMEMBERED + 8 {
            let raw = format!("x-field-{i}");
            assert_eq!(names.name(i, raw.as_bytes()).unwrap(), raw.as_str());
        }
        assert_eq!(names.seen.len(), REMEMBERED);
        // A gap (position past the end) is converted without being remembered.
        let mut fresh = FieldNames::default();
        assert_eq!(fresh.name(3, b"Date").unwrap(), http::header::DATE);
        assert!(fresh.seen.is_empty());
    }
}
