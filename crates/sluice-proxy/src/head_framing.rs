//! The host frames every message it sends (docs/modules.md, "Framing is the host's"): what a
//! module's response-header phase leaves in a head is put back in order before the head is
//! stored or sent. A module may not declare a length the body does not have, chunk a body
//! itself, add hop-by-hop fields or give a response a status that cannot carry the body it
//! has. Without this, a `Content-Length: 5` on a 22-byte body leaves 17 bytes in front of
//! the next response on a keep-alive connection, and a `Transfer-Encoding` stored with an
//! object breaks every hit on it.

use crate::error::{Kind, ProxyError, Side};
use http::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{response, StatusCode};

/// A response head's framing as the host set it, taken before a module phase that may edit
/// the head: its status, how many fields it had, and where its `Content-Length` value lies
/// (compared, never read: taking a copy of the value would cost an allocation per hit).
pub(crate) struct HeadFraming {
    status: StatusCode,
    fields: usize,
    length: Option<(usize, usize)>,
}

/// Where a field value's bytes lie: a value a module set, even to the same text, lies
/// elsewhere.
fn place(value: &HeaderValue) -> (usize, usize) {
    (value.as_bytes().as_ptr() as usize, value.len())
}

impl HeadFraming {
    /// The framing of `parts` now.
    #[inline]
    pub(crate) fn of(parts: &response::Parts) -> Self {
        Self { status: parts.status, fields: parts.headers.len(), length: parts.headers.get(CONTENT_LENGTH).map(place) }
    }

    /// Puts the framing in order after the phase: removes the hop-by-hop fields a module
    /// added (`Transfer-Encoding`, `Connection` and the fields it names, ...; the host
    /// removed the origin's before the phase), and drops a `Content-Length` a module set,
    /// changed or removed (the body then goes out without a length, chunked in HTTP/1.1; a
    /// module that changes the body declares so, and the host drops the length itself). A
    /// head whose field count and `Content-Length` are as they were, with no
    /// `Transfer-Encoding` or `Connection`, is left as it is (a few lookups: the common case).
    /// A change of status is the module's to make, but not to or from one without a body
    /// (1xx, 204, 304) or outside 200-599: that is refused as the module's failure (500).
    pub(crate) fn restore(self, parts: &mut response::Parts) -> Result<(), ProxyError> {
        if parts.status != self.status && !(has_body(parts.status) && has_body(self.status)) {
            return Err(ProxyError::new(
                Kind::Internal,
                Side::Module,
                format!(
                    "a module changed the response's status from {} to {}; the host cannot frame the body for it",
                    self.status.as_u16(),
                    parts.status.as_u16()
                ),
            ));
        }
        let headers = &mut parts.headers;
        let length = headers.get(CONTENT_LENGTH).map(place);
        if headers.len() == self.fields
            && length == self.length
            && !headers.contains_key(TRANSFER_ENCODING)
            && !headers.contains_key(CONNECTION)
        {
            return Ok(());
        }
        sluice_http::hop::remove_hop_by_hop(headers);
        if headers.get(CONTENT_LENGTH).map(place) != self.length {
            headers.remove(CONTENT_LENGTH);
        }
        Ok(())
    }
}

/// Whether a response with `status` carries a body (RFC 9110 §6.4.1) and is one a proxy
/// sends on (200-599).
fn has_body(status: StatusCode) -> bool {
    (200..=599).contains(&status.as_u16()) && status != StatusCode::NO_CONTENT && status != StatusCode::NOT_MODIFIED
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Response;

    fn head(status: u16, fields: &[(&str, &str)]) -> response::Parts {
        let mut builder = Response::builder().status(status);
        for (name, value) in fields {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn lengths_and_hop_by_hop_fields_a_module_set_are_undone() {
        let mut parts = head(200, &[("content-length", "22"), ("x-kept", "1")]);
        let framing = HeadFraming::of(&parts);
        parts.headers.insert("content-length", HeaderValue::from_static("5"));
        parts.headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        parts.headers.insert("connection", HeaderValue::from_static("close, x-gone"));
        parts.headers.insert("x-gone", HeaderValue::from_static("1"));
        parts.headers.insert("x-added", HeaderValue::from_static("1"));
        framing.restore(&mut parts).unwrap();
        assert!(!parts.headers.contains_key("content-length"), "the module's 5 is not sent: no length then");
        for gone in ["transfer-encoding", "connection", "x-gone"] {
            assert!(!parts.headers.contains_key(gone), "{gone}");
        }
        assert!(parts.headers.contains_key("x-kept") && parts.headers.contains_key("x-added"));

        let mut chunked = head(200, &[]);
        let framing = HeadFraming::of(&chunked);
        chunked.headers.insert("content-length", HeaderValue::from_static("1000"));
        framing.restore(&mut chunked).unwrap();
        assert!(!chunked.headers.contains_key("content-length"), "a body of unknown length stays so");

        let mut untouched = head(200, &[("content-length", "22"), ("x-kept", "1")]);
        let framing = HeadFraming::of(&untouched);
        untouched.headers.insert("x-kept", HeaderValue::from_static("2"));
        framing.restore(&mut untouched).unwrap();
        assert_eq!(untouched.headers.get("content-length").unwrap(), "22", "a head whose framing no module touched");
    }

    #[test]
    fn a_status_that_cannot_carry_the_body_is_refused() {
        for (from, to, allowed) in [
            (200, 404, true),
            (503, 200, true),
            (200, 204, false),
            (200, 304, false),
            (204, 200, false),
            (200, 101, false),
            (200, 999, false),
        ] {
            let mut parts = head(from, &[]);
            let framing = HeadFraming::of(&parts);
            parts.status = StatusCode::from_u16(to).unwrap();
            assert_eq!(framing.restore(&mut parts).is_ok(), allowed, "{from} -> {to}");
        }
        let mut same = head(304, &[]);
        assert!(HeadFraming::of(&same).restore(&mut same).is_ok(), "unchanged");
    }
}
