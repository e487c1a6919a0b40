//! gRPC calls out of a plugin (`proxy_grpc_call`, the SDK's `dispatch_grpc_call`): unary
//! calls to one of the plugin's clusters, framed as the gRPC-over-HTTP/2 protocol frames
//! them (`POST /<service>/<method>`, `content-type: application/grpc`, each message behind a
//! five-byte prefix, the status in the trailers), over HTTP/2 cleartext with prior knowledge
//! (what gRPC servers listening without TLS speak), multiplexed on one connection per
//! cluster (`crate::callout::CallClients`).
//!
//! The plugin encodes its request message and decodes the answer itself (protobuf is the
//! plugin's business, as in Envoy); the host frames, sends and reports a status. Every way a
//! call can fail ends in a status the plugin sees in `proxy_on_grpc_close`: the server's own,
//! or the one the gRPC specification gives for the failure (`UNAVAILABLE` for a transport
//! failure, `DEADLINE_EXCEEDED` past the timeout, the HTTP-status mapping for a non-gRPC
//! answer, `INTERNAL` for a malformed one).

use crate::abi::Status;
use crate::callout::{CallClient, CallResponse};
use crate::headermap::WirePairs;
use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use std::time::Duration;

/// gRPC status codes the host reports itself.
pub(crate) mod code {
    pub const OK: u32 = 0;
    pub const UNKNOWN: u32 = 2;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
    pub const UNAUTHENTICATED: u32 = 16;
}

/// How a gRPC call ended: its status code and message (`proxy_get_status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrpcStatus {
    pub code: u32,
    pub message: String,
}

impl GrpcStatus {
    pub(crate) fn new(code: u32, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

/// Metadata a plugin may not set: the protocol's own fields.
const RESERVED: [&str; 5] = ["content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding"];

/// The request of a unary call of `service`/`method` on `authority`, with the plugin's
/// `metadata` and `message`: [`head`] with a deadline, and the message framed.
pub(crate) fn request(
    authority: &str,
    (service, method): (&[u8], &[u8]),
    metadata: &WirePairs<'_>,
    message: &[u8],
    timeout: Duration,
) -> Result<Request<Bytes>, Status> {
    Ok(head(authority, (service, method), metadata, Some(timeout))?.map(|()| frame(message)))
}

/// The head of a call or stream of `service`/`method` on `authority`, with the plugin's
/// `metadata` (pseudo-headers and the protocol's own fields skipped; `-bin` values
/// base64-encoded, as the protocol carries them) and `grpc-timeout` when there is a
/// `timeout`. `ParseFailure` for names that do not make a path and metadata that is not
/// valid HTTP (the statuses the Rust SDK hands back to the plugin as an `Err`; any other it
/// turns into a panic).
pub(crate) fn head(
    authority: &str,
    (service, method): (&[u8], &[u8]),
    metadata: &WirePairs<'_>,
    timeout: Option<Duration>,
) -> Result<Request<()>, Status> {
    let name = |bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b'?' && b != b'#'))
            .map(str::to_owned)
    };
    let (service, method) = (name(service).ok_or(Status::ParseFailure)?, name(method).ok_or(Status::ParseFailure)?);
    let uri = format!("http://{authority}/{service}/{method}");
    let mut request = Request::builder().method(Method::POST).uri(uri).body(()).map_err(|_| Status::ParseFailure)?;
    let headers = request.headers_mut();
    for (key, value) in metadata.iter().filter(|(key, _)| !key.starts_with(b":")) {
        let key = HeaderName::from_bytes(key).map_err(|_| Status::ParseFailure)?;
        if RESERVED.contains(&key.as_str()) {
            continue;
        }
        let value = if key.as_str().ends_with("-bin") {
            HeaderValue::try_from(base64::engine::general_purpose::STANDARD_NO_PAD.encode(value))
        } else {
            HeaderValue::from_bytes(value)
        };
        headers.append(key, value.map_err(|_| Status::ParseFailure)?);
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if let Some(timeout) = timeout {
        // At most eight digits (the protocol's limit); a minute in milliseconds fits.
        let millis = timeout.as_millis().min(99_999_999);
        headers.insert("grpc-timeout", HeaderValue::try_from(format!("{millis}m")).expect("digits"));
    }
    Ok(request)
}

/// `message` behind the five-byte prefix: not compressed, its length (big-endian).
pub(crate) fn frame(message: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(5 + message.len());
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.put_slice(message);
    framed.freeze()
}

/// Makes the call through `client` within `timeout`: the answer's message (at most
/// `max_message` bytes) and status. Never fails: a failure is a status.
pub(crate) async fn perform(
    client: &CallClient,
    request: Request<Bytes>,
    timeout: Duration,
    max_message: usize,
) -> CallResponse {
    let uri = request.uri().clone();
    let status = match tokio::time::timeout(timeout, exchange(client, request, max_message)).await {
        Ok(Ok(message)) => {
            return CallResponse { head: None, body: message, grpc: Some(GrpcStatus::new(code::OK, "")) }
        }
        Ok(Err(status)) => status,
        Err(_) => GrpcStatus::new(code::DEADLINE_EXCEEDED, format!("no answer within {timeout:?}")),
    };
    tracing::debug!("plugin grpc call to {uri} ended with status {}: {}", status.code, status.message);
    CallResponse { head: None, body: Bytes::new(), grpc: Some(status) }
}

/// The exchange: the answer's one message, or the status it ended with.
async fn exchange(client: &CallClient, request: Request<Bytes>, max_message: usize) -> Result<Bytes, GrpcStatus> {
    let response = client
        .request(request.map(crate::callout::whole))
        .await
        .map_err(|err| GrpcStatus::new(code::UNAVAILABLE, crate::callout::describe(&err)))?;
    let (head, body) = response.into_parts();
    check_answer(&head)?;
    // The prefix on top of the message.
    let collected = Limited::new(body, max_message.saturating_add(5)).collect().await.map_err(|err| {
        if err.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
            GrpcStatus::new(code::RESOURCE_EXHAUSTED, format!("answer larger than {max_message} bytes"))
        } else {
            GrpcStatus::new(code::UNAVAILABLE, format!("body: {}", crate::callout::describe(err.as_ref())))
        }
    })?;
    let status = collected
        .trailers()
        .and_then(status_in)
        .unwrap_or_else(|| GrpcStatus::new(code::INTERNAL, "the answer has no grpc-status"));
    if status.code != code::OK {
        return Err(status);
    }
    unframe(&collected.to_bytes())
}

/// Why an answer's head ends the call: not a gRPC answer (its HTTP status mapped, or
/// `UNKNOWN`), or a trailers-only answer (its status).
pub(crate) fn check_answer(head: &http::response::Parts) -> Result<(), GrpcStatus> {
    if head.status != StatusCode::OK {
        return Err(GrpcStatus::new(from_http_status(head.status), format!("HTTP status {}", head.status)));
    }
    let is_grpc = head.headers.get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !is_grpc {
        return Err(GrpcStatus::new(code::UNKNOWN, "the answer is not gRPC (content-type)"));
    }
    match status_in(&head.headers) {
        Some(status) => Err(status),
        None => Ok(()),
    }
}

/// The messages of a stream's answer, as its data arrives.
#[derive(Default)]
pub(crate) struct Deframer {
    buffer: BytesMut,
}

impl Deframer {
    /// Takes in the next piece of the answer.
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.buffer.extend_from_slice(data);
    }

    /// The next whole message, if there is one; `INTERNAL` for a compressed one,
    /// `RESOURCE_EXHAUSTED` for one over `max` bytes.
    pub(crate) fn next_message(&mut self, max: usize) -> Result<Option<Bytes>, GrpcStatus> {
        if self.buffer.len() < 5 {
            return Ok(None);
        }
        if self.buffer[0] != 0 {
            return Err(GrpcStatus::new(code::INTERNAL, "malformed answer: a compressed message"));
        }
        let len = u32::from_be_bytes([self.buffer[1], self.buffer[2], self.buffer[3], self.buffer[4]]) as usize;
        if len > max {
            return Err(GrpcStatus::new(code::RESOURCE_EXHAUSTED, format!("a message larger than {max} bytes")));
        }
        if self.buffer.len() < 5 + len {
            return Ok(None);
        }
        let mut message = self.buffer.split_to(5 + len);
        Ok(Some(message.split_off(5).freeze()))
    }

    /// Whether a message was left unfinished.
    pub(crate) fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }
}

/// The one message of a unary answer (cut as a stream's are, by [`Deframer`]).
fn unframe(data: &[u8]) -> Result<Bytes, GrpcStatus> {
    let malformed = |what: &str| GrpcStatus::new(code::INTERNAL, format!("malformed answer: {what}"));
    let mut deframer = Deframer::default();
    deframer.push(data);
    // The body was already held to its limit.
    let message = deframer.next_message(usize::MAX)?.ok_or_else(|| malformed("no message"))?;
    if !deframer.is_empty() {
        return Err(malformed("not one message"));
    }
    Ok(message)
}

/// `grpc-status` and `grpc-message` (percent-decoded) in `headers`, if there.
pub(crate) fn status_in(headers: &HeaderMap) -> Option<GrpcStatus> {
    let code = headers.get("grpc-status")?;
    let Some(code) = code.to_str().ok().and_then(|c| c.parse::<u32>().ok()) else {
        return Some(GrpcStatus::new(code::INTERNAL, "malformed grpc-status"));
    };
    let message = headers
        .get("grpc-message")
        .map(|m| percent_encoding::percent_decode(m.as_bytes()).decode_utf8_lossy().into_owned())
        .unwrap_or_default();
    Some(GrpcStatus::new(code, message))
}

/// The gRPC code for an answer with HTTP status `status` (the specification's mapping).
fn from_http_status(status: StatusCode) -> u32 {
    match status.as_u16() {
        400 => code::INTERNAL,
        401 => code::UNAUTHENTICATED,
        403 => code::PERMISSION_DENIED,
        404 => code::UNIMPLEMENTED,
        429 | 502 | 503 | 504 => code::UNAVAILABLE,
        _ => code::UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&'static str, &'static [u8])]) -> WirePairs<'static> {
        list.iter().map(|(n, v)| (n.as_bytes(), *v)).collect()
    }

    #[test]
    fn a_request_is_a_framed_post_to_service_and_method() {
        let metadata = pairs(&[("x-user", b"ann"), ("trace-bin", b"\x01\x02"), ("content-type", b"text/plain")]);
        let request = request(
            "127.0.0.1:9",
            (b"grpc.health.v1.Health", b"Check"),
            &metadata,
            b"\x0a\x01x",
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(
            (request.method(), request.uri().to_string()),
            (&Method::POST, "http://127.0.0.1:9/grpc.health.v1.Health/Check".to_owned())
        );
        let headers = request.headers();
        assert_eq!(headers["content-type"], "application/grpc");
        assert_eq!((headers["te"].as_bytes(), headers["grpc-timeout"].as_bytes()), (&b"trailers"[..], &b"5000m"[..]));
        assert_eq!((headers["x-user"].as_bytes(), headers["trace-bin"].as_bytes()), (&b"ann"[..], &b"AQI"[..]));
        assert_eq!(headers.get_all("content-type").iter().count(), 1);
        assert_eq!(&request.body()[..], b"\x00\x00\x00\x00\x03\x0a\x01x");
    }

    #[test]
    fn names_that_do_not_make_a_path_are_refused() {
        let none = pairs(&[]);
        let call =
            |service: &[u8], method: &[u8]| request("h:1", (service, method), &none, b"", Duration::ZERO).map(|_| ());
        assert_eq!(call(b"", b"Check"), Err(Status::ParseFailure));
        assert_eq!(call(b"a/b", b"Check"), Err(Status::ParseFailure));
        assert_eq!(call(b"svc", b"Check now"), Err(Status::ParseFailure));
        assert_eq!(
            request("h:1", (b"s", b"m"), &pairs(&[("bad name", b"v")]), b"", Duration::ZERO).map(|_| ()),
            Err(Status::ParseFailure)
        );
    }

    #[test]
    fn an_answer_holds_exactly_one_uncompressed_message() {
        assert_eq!(unframe(b"\x00\x00\x00\x00\x02\x08\x01").unwrap(), &b"\x08\x01"[..]);
        assert_eq!(unframe(b"\x00\x00\x00\x00\x00").unwrap(), &b""[..]);
        for bad in
            [&b""[..], b"\x00\x00\x00", b"\x01\x00\x00\x00\x00", b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"]
        {
            assert_eq!(unframe(bad).unwrap_err().code, code::INTERNAL, "{bad:?}");
        }
    }

    #[test]
    fn a_stream_answer_is_cut_into_its_messages_as_it_arrives() {
        let mut deframer = Deframer::default();
        deframer.push(b"\x00\x00\x00\x00\x02\x08");
        assert_eq!(deframer.next_message(16), Ok(None));
        // The end of that message, an empty one, and the flag byte of a third.
        deframer.push(b"\x01\x00\x00\x00\x00\x00\x00");
        assert_eq!(deframer.next_message(16).unwrap().as_deref(), Some(&b"\x08\x01"[..]));
        assert_eq!(deframer.next_message(16).unwrap().as_deref(), Some(&b""[..]));
        assert_eq!((deframer.next_message(16), deframer.is_empty()), (Ok(None), false));
        deframer.push(b"\x00\x00\x00\x20");
        assert_eq!(deframer.next_message(16).unwrap_err().code, code::RESOURCE_EXHAUSTED);
        let mut compressed = Deframer::default();
        compressed.push(b"\x01\x00\x00\x00\x00");
        assert_eq!(compressed.next_message(16).unwrap_err().code, code::INTERNAL);
    }

    #[test]
    fn statuses_come_from_grpc_fields_or_the_http_status() {
        let mut headers = HeaderMap::new();
        assert_eq!(status_in(&headers), None);
        headers.insert("grpc-status", HeaderValue::from_static("5"));
        headers.insert("grpc-message", HeaderValue::from_static("no%20such%20service"));
        assert_eq!(status_in(&headers), Some(GrpcStatus::new(5, "no such service")));
        headers.insert("grpc-status", HeaderValue::from_static("five"));
        assert_eq!(status_in(&headers).unwrap().code, code::INTERNAL);
        assert_eq!(from_http_status(StatusCode::NOT_FOUND), code::UNIMPLEMENTED);
        assert_eq!(from_http_status(StatusCode::SERVICE_UNAVAILABLE), code::UNAVAILABLE);
        assert_eq!(from_http_status(StatusCode::IM_A_TEAPOT), code::UNKNOWN);
    }
}
