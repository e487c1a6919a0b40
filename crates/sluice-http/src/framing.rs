//! Which statuses carry a body, and the fields of a response head that say how it is framed, which a proxy keeps for
//! itself when untrusted code edits the head (Sluice's Proxy-Wasm plugins and ext_proc
//! processors; docs/modules.md, "Framing is the host's"): `Content-Length` and the
//! hop-by-hop fields (RFC 9110 §7.6.1). A `Content-Length: 5` written on a 22-byte body
//! would leave 17 bytes in front of the next response on a keep-alive connection, and a
//! stored `Transfer-Encoding` would break every hit on the object.
//!
//! The check runs where such code writes a field, so a head nobody edits costs nothing.

use crate::hop::is_always_hop_by_hop;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH};
use http::StatusCode;

/// Whether a response with `status` carries a body (RFC 9110 §6.4.1): not a 1xx, 204 or 304.
pub fn status_has_body(status: StatusCode) -> bool {
    !(status.is_informational() || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED)
}

/// What becomes of an edit that writes a field of a response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFieldWrite {
    /// An end-to-end field: written as asked.
    Take,
    /// A hop-by-hop field (`Connection`, `Transfer-Encoding`, `Keep-Alive`, `Upgrade`, `TE`,
    /// `Trailer`, `Proxy-Connection`, `Proxy-Authenticate`, `Proxy-Authorization`): not
    /// written; the host sets the connection's own.
    Ignore,
    /// `Content-Length`: see [`write_length`].
    Length,
}

/// What becomes of an edit writing field `name` of a response head.
pub fn response_field_write(name: &HeaderName) -> ResponseFieldWrite {
    if *name == CONTENT_LENGTH {
        ResponseFieldWrite::Length
    } else if is_always_hop_by_hop(name) {
        ResponseFieldWrite::Ignore
    } else {
        ResponseFieldWrite::Take
    }
}

/// Takes an edit writing `Content-Length: value` into `headers`: the field stays as it is
/// when it already has exactly that value (a plugin writing back the head it read), and is
/// removed otherwise, so the host frames the body by what it is: by its known length, or
/// chunked. An edit never declares a length of its own; one that changes the body says so
/// to the host, which drops the length itself.
pub fn write_length(headers: &mut HeaderMap, value: &HeaderValue) {
    let mut values = headers.get_all(CONTENT_LENGTH).iter();
    let same = values.next() == Some(value) && values.next().is_none();
    if !same {
        headers.remove(CONTENT_LENGTH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_fields_are_the_hosts() {
        for (name, write) in [
            ("content-length", ResponseFieldWrite::Length),
            ("transfer-encoding", ResponseFieldWrite::Ignore),
            ("connection", ResponseFieldWrite::Ignore),
            ("keep-alive", ResponseFieldWrite::Ignore),
            ("upgrade", ResponseFieldWrite::Ignore),
            ("trailer", ResponseFieldWrite::Ignore),
            ("content-type", ResponseFieldWrite::Take),
            ("x-listed", ResponseFieldWrite::Take),
        ] {
            assert_eq!(response_field_write(&HeaderName::from_static(name)), write, "{name}");
        }
    }

    #[test]
    fn statuses_without_a_body() {
        for (status, body) in [(100, false), (200, true), (204, false), (206, true), (304, false), (404, true)] {
            assert_eq!(status_has_body(StatusCode::from_u16(status).unwrap()), body, "{status}");
        }
    }

    #[test]
    fn a_length_stays_only_when_written_back_as_it_is() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("22"));
        write_length(&mut headers, &HeaderValue::from_static("22"));
        assert_eq!(headers.get(CONTENT_LENGTH).unwrap(), "22");
        write_length(&mut headers, &HeaderValue::from_static("5"));
        assert!(!headers.contains_key(CONTENT_LENGTH), "a length of the module's own: none then");
        write_length(&mut headers, &HeaderValue::from_static("5"));
        assert!(!headers.contains_key(CONTENT_LENGTH), "nor on a body of unknown length");
    }
}
