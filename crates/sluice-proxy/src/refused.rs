//! Requests refused before any transaction starts: heads hyper's parser refuses (malformed,
//! oversized) and those the framing guard ([`crate::framing`]) hands it refused (ambiguous
//! framing: request smuggling). hyper answers them itself (`400`, `431`, `414`) and ends the
//! connection with the parse error; the connection's server loop passes that error here.
//! A request line too long to read is the guard's to tell: the service answers its stand-in
//! here ([`uri_too_long`]: `414`, the connection closed). All are logged as Squid logs them
//! (`NONE/400 … NONE error:invalid-request`) and counted in the metrics. Nothing runs for a
//! normal request.

use crate::access_log::LogRecord;
use crate::body::ProxyBody;
use crate::outcome::ResultCode;
use crate::state::State;
use http::{header, HeaderValue, Method, Response, StatusCode, Version};
use std::net::SocketAddr;
use std::time::Duration;

/// The status hyper answered a connection's parse error with and the URL Squid logs for it
/// (`error:invalid-request`, or `error:request-too-large` for a head or URI over the limit);
/// `None` when the error is not a refused request head (hyper then answers nothing).
fn refusal(err: &(dyn std::error::Error + 'static)) -> Option<(u16, &'static str)> {
    let err = err.downcast_ref::<hyper::Error>()?;
    if !err.is_parse() || err.is_parse_status() || err.is_parse_version_h2() {
        return None;
    }
    if err.is_parse_too_large() {
        // hyper tells the two apart only in its message.
        let status = if err.to_string().contains("URI") { 414 } else { 431 };
        return Some((status, "error:request-too-large"));
    }
    // `Parse::Internal` gets no answer from hyper either.
    if err.to_string().contains("internal") {
        return None;
    }
    Some((400, "error:invalid-request"))
}

/// Logs and counts the request a connection from `client` ended with, when `err` (what
/// serving the connection returned) is hyper refusing its head.
pub fn note(state: &State, client: SocketAddr, err: &(dyn std::error::Error + 'static)) {
    if let Some((status, url)) = refusal(err) {
        record(state, client, status, url);
    }
}

/// The answer to the framing guard's stand-in for a request from `client` whose request line
/// was longer than a whole head may be (RFC 9112 §3): `414`, empty, the connection closed, as
/// hyper answers its own refusals; logged and counted as they are.
pub fn uri_too_long(state: &State, client: SocketAddr) -> Response<ProxyBody> {
    record(state, client, 414, "error:request-too-large");
    let mut response = Response::new(ProxyBody::empty());
    *response.status_mut() = StatusCode::URI_TOO_LONG;
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Logs and counts a refused request.
fn record(state: &State, client: SocketAddr, status: u16, url: &str) {
    state.metrics.record(ResultCode::None, status, 0, true, Duration::ZERO);
    if let Some(log) = &state.access_log {
        log.log(LogRecord {
            end: state.clock.now(),
            elapsed: Duration::ZERO,
            client: client.ip(),
            code: ResultCode::None,
            completed: true,
            status,
            bytes: answer_bytes(status),
            // Squid logs the method of a request it could not parse as `NONE`.
            method: Method::from_bytes(b"NONE").expect("a token"),
            url: url.to_owned(),
            version: Version::HTTP_11,
            peer: None,
            content_type: None,
            referer: None,
            user_agent: None,
            user: None,
            extra: Vec::new(),
        });
    }
}

/// The size of hyper's answer: its status line, `connection: close`, `content-length: 0`,
/// `date` and the empty line.
fn answer_bytes(status: u16) -> u64 {
    let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    let status_line = "HTTP/1.1 000 ".len() + reason.len() + 2;
    (status_line
        + "connection: close\r\n".len()
        + "content-length: 0\r\n".len()
        + "date: Sun, 06 Nov 1994 08:49:37 GMT\r\n".len()
        + 2) as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn answer_size() {
        // "HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: …\r\n\r\n"
        assert_eq!(super::answer_bytes(400), 26 + 19 + 19 + 37 + 2);
    }
}
