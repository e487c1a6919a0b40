//! HTTP/1.1 on the wire towards origins (RFC 9112): request heads out, response heads in,
//! and the framing of response bodies, chunked decoding included. Pure functions over
//! buffers, unit-tested without sockets.

use super::names::FieldNames;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, response, Method, Response, StatusCode, Version};
use std::mem::MaybeUninit;

/// The largest response head accepted (status line and fields).
pub const MAX_HEAD: usize = 64 * 1024;
/// The most fields a response head may carry.
const MAX_FIELDS: usize = 128;
/// The longest chunk-size line (with extensions) or trailer block accepted.
const MAX_CHUNK_LINE: usize = 4096;
const MAX_TRAILERS: usize = 16 * 1024;

/// An origin spoke something other than HTTP/1.1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("origin protocol error: {0}")]
pub struct WireError(pub &'static str);

/// How a response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the origin closes the connection.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug)]
pub struct ResponseHead {
    pub parts: response::Parts,
    pub framing: Framing,
    /// The connection may carry another request after this response's body.
    pub keep_alive: bool,
}

/// How the request body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFraming {
    /// No body and no framing field.
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Appends the request head to `out`: request line in origin form, the fields of `parts`
/// except the framing fields, then the framing field `framing` asks for.
pub fn encode_request_head(parts: &request::Parts, framing: RequestFraming, out: &mut Vec<u8>) {
    let target = if parts.method == Method::OPTIONS && parts.uri.path() == "*" {
        "*"
    } else {
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    };
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &parts.headers {
        if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match framing {
        RequestFraming::None => {}
        RequestFraming::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(n.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        RequestFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

/// Parses a response head at the start of `buf`. `Ok(None)` means more bytes are needed;
/// on success the head's bytes are consumed from `buf`.
///
/// The head's bytes are copied once into a buffer of their own, and every field value is a
/// slice of it (no allocation per value, as in hyper's client). The values do not share
/// `buf`'s allocation: a cached response's fields keep alive only its head, never a
/// connection's read buffer. Field names come through `names`, the connection's names of
/// its previous head.
pub fn parse_response_head(
    buf: &mut BytesMut,
    method: &Method,
    names: &mut FieldNames,
) -> Result<Option<ResponseHead>, WireError> {
    if buf.is_empty() {
        // The first call of an exchange, before anything was read.
        return Ok(None);
    }
    let (len, status, version, headers, reason) = {
        let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
        let mut parsed = httparse::Response::new(&mut []);
        let len =
            match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut parsed, buf, &mut fields) {
                Ok(httparse::Status::Complete(len)) => len,
                Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                    return Err(WireError("response head too large"))
                }
                Ok(httparse::Status::Partial) => return Ok(None),
                Err(httparse::Error::TooManyHeaders) => return Err(WireError("too many response fields")),
                Err(_) => return Err(WireError("malformed response head")),
            };
        if len > MAX_HEAD {
            return Err(WireError("response head too large"));
        }
        // A status code is three digits, 100 to 599 (RFC 9110 §15).
        let status = parsed
            .code
            .filter(|code| (100..600).contains(code))
            .and_then(|c| StatusCode::from_u16(c).ok())
            .ok_or(WireError("invalid status code"))?;
        // The origin's phrase goes on where hyper knows none (it would write `<none>`).
        let reason = parsed
            .reason
            .filter(|reason| status.canonical_reason().is_none() && !reason.is_empty())
            .and_then(|reason| hyper::ext::ReasonPhrase::try_from(reason.as_bytes()).ok());
        let version = if parsed.version == Some(0) { Version::HTTP_10 } else { Version::HTTP_11 };
        // The values are slices of the copy, at the offsets httparse found them in `buf`.
        let head = Bytes::copy_from_slice(&buf[..len]);
        let base = buf.as_ptr() as usize;
        let mut headers = HeaderMap::with_capacity(parsed.headers.len());
        for (position, field) in parsed.headers.iter().enumerate() {
            let name = names.name(position, field.name.as_bytes()).ok_or(WireError("invalid field name"))?;
            let value = if field.value.is_empty() {
                // (An empty slice need not point into `buf`.)
                HeaderValue::from_static("")
            } else {
                let start = field.value.as_ptr() as usize - base;
                HeaderValue::from_maybe_shared(head.slice(start..start + field.value.len()))
                    .map_err(|_| WireError("invalid field value"))?
            };
            headers.append(name, value);
        }
        (len, status, version, headers, reason)
    };
    buf.advance(len);
    let (mut parts, ()) = Response::new(()).into_parts();
    if let Some(reason) = reason {
        parts.extensions.insert(reason);
    }
    parts.status = status;
    parts.version = version;
    parts.headers = headers;
    let (framing, field) = response_framing(method, status, &parts.headers)?;
    match field {
        LengthField::AsSent => {}
        // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length, which a recipient must
        // remove; kept, it would announce the wrong length for the decoded body.
        LengthField::Ambiguous => {
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        // RFC 9110 §8.6: one value goes on, which HTTP/2 clients and many HTTP/1.1 ones
        // need.
        LengthField::Listed(n) => {
            parts.headers.insert(header::CONTENT_LENGTH, n.into());
        }
        LengthField::Unread => single_content_length(status, &mut parts.headers),
    }
    let ambiguous = field == LengthField::Ambiguous;
    let keep_alive = framing != Framing::UntilClose && !ambiguous && persistent(version, &parts.headers);
    Ok(Some(ResponseHead { parts, framing, keep_alive }))
}

/// What the response's `Content-Length` field becomes, once its framing is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LengthField {
    /// As it was sent (one value, or none).
    AsSent,
    /// Sent with `Transfer-Encoding`: the body is read as chunked, the field removed, and
    /// the connection not reused.
    Ambiguous,
    /// A list of this one length (`3, 3`, or the field repeated).
    Listed(u64),
    /// Not read: the response has no body ([`single_content_length`] tidies it).
    Unread,
}

/// The framing of a response body (RFC 9112 §6.3), and what its `Content-Length` field
/// becomes. A Transfer-Encoding other than `chunked` alone is an error, and so are
/// `Content-Length` values that disagree.
fn response_framing(
    method: &Method,
    status: StatusCode,
    headers: &HeaderMap,
) -> Result<(Framing, LengthField), WireError> {
    if method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok((Framing::Empty, LengthField::Unread));
    }
    let has_length = headers.contains_key(header::CONTENT_LENGTH);
    if headers.contains_key(header::TRANSFER_ENCODING) {
        // Only `chunked` alone is decoded. Any other coding (`gzip, chunked`, `gzip`) would
        // reach the client and the cache as if it were the content, with the field that says
        // so removed as hop-by-hop: refused (502), as nginx does.
        let mut codings = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|c| !c.is_empty());
        let only_chunked =
            codings.next().is_some_and(|c| c.eq_ignore_ascii_case(b"chunked")) && codings.next().is_none();
        if !only_chunked {
            return Err(WireError("unsupported transfer coding"));
        }
        return Ok((Framing::Chunked, if has_length { LengthField::Ambiguous } else { LengthField::AsSent }));
    }
    if !has_length {
        return Ok((Framing::UntilClose, LengthField::AsSent));
    }
    let mut length = None;
    let mut items = 0;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for item in value.as_bytes().split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            let n = parse_decimal(item).ok_or(WireError("invalid Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(WireError("conflicting Content-Length values"));
            }
            length = Some(n);
            items += 1;
        }
    }
    let length = length.ok_or(WireError("invalid Content-Length"))?;
    Ok((Framing::Length(length), if items > 1 { LengthField::Listed(length) } else { LengthField::AsSent }))
}

/// The `Content-Length` of a response without a body (`HEAD`, 1xx, 204, 304), where it
/// frames nothing, left with at most one value to send on (RFC 9110 §8.6): a list of one
/// length (`3, 3`, or the field repeated) becomes that length; a 1xx or 204, which must not
/// carry the field, loses it; a list that does not agree on a length is dropped, as it says
/// nothing reliable.
fn single_content_length(status: StatusCode, headers: &mut HeaderMap) {
    if status == StatusCode::NO_CONTENT || status.is_informational() {
        headers.remove(header::CONTENT_LENGTH);
        return;
    }
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let listed = match (values.next(), values.next()) {
        (None, _) => return,
        (Some(value), None) => value.as_bytes().contains(&b','),
        (Some(_), Some(_)) => true,
    };
    if !listed {
        return;
    }
    let mut agreed = None;
    let mut disagree = false;
    for item in headers.get_all(header::CONTENT_LENGTH).iter().flat_map(|v| v.as_bytes().split(|&b| b == b',')) {
        match parse_decimal(item.trim_ascii()) {
            Some(n) if agreed.is_none_or(|a| a == n) => agreed = Some(n),
            _ => disagree = true,
        }
    }
    match agreed.filter(|_| !disagree) {
        Some(n) => {
            headers.insert(header::CONTENT_LENGTH, n.into());
        }
        None => {
            headers.remove(header::CONTENT_LENGTH);
        }
    }
}

/// Whether the connection persists after this response (RFC 9112 §9.3).
fn persistent(version: Version, headers: &HeaderMap) -> bool {
    let has = |token: &[u8]| {
        headers
            .get_all(header::CONNECTION)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
    };
    if version == Version::HTTP_10 {
        has(b"keep-alive")
    } else {
        !has(b"close")
    }
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A chunk size: hex digits, as many leading zeros as the sender likes (RFC 9112 §7.1), at
/// most 15 significant digits (sizes below 2^60).
fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let significant = &digits[digits.iter().position(|&d| d != b'0').unwrap_or(digits.len())..];
    if significant.is_empty() {
        return Some(0);
    }
    if significant.len() > 15 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(significant).ok()?, 16).ok()
}

/// Decodes the chunked transfer coding (RFC 9112 §7.1) incrementally. Trailer fields are
/// read and dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: Chunk,
    trailer_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// Expecting the CRLF after chunk data.
    DataEnd,
    /// Reading trailer lines, up to the empty line.
    Trailers,
    Done,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self { state: Chunk::Size, trailer_bytes: 0 }
    }
}

impl ChunkedDecoder {
    /// True once the last chunk and the trailer section have been read.
    pub fn is_done(&self) -> bool {
        self.state == Chunk::Done
    }

    /// The next piece of body data in `buf`, consuming it and the framing around it.
    /// `Ok(None)` means more bytes are needed, or the body ended ([`Self::is_done`]).
    /// Framing that follows the data is consumed eagerly, so `is_done` turns true as soon
    /// as the bytes announcing the end are in `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, WireError> {
        self.skip_framing(buf)?;
        let Chunk::Data(left) = self.state else { return Ok(None) };
        if buf.is_empty() {
            return Ok(None);
        }
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        let data = buf.split_to(take).freeze();
        let left = left - take as u64;
        self.state = if left == 0 { Chunk::DataEnd } else { Chunk::Data(left) };
        self.skip_framing(buf)?;
        Ok(Some(data))
    }

    /// Consumes framing (CRLFs, size lines, trailers) until data or the end, or until `buf`
    /// runs out.
    fn skip_framing(&mut self, buf: &mut BytesMut) -> Result<(), WireError> {
        loop {
            match self.state {
                Chunk::Data(_) | Chunk::Done => return Ok(()),
                Chunk::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(());
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(WireError("chunk data not followed by CRLF"));
                    }
                    buf.advance(2);
                    self.state = Chunk::Size;
                }
                Chunk::Size => {
                    let Some(line) = take_line(buf, MAX_CHUNK_LINE, "chunk-size line too long")? else { return Ok(()) };
                    let size_end = line.iter().position(|&b| b == b';').unwrap_or(line.len());
                    let size = parse_hex(line[..size_end].trim_ascii()).ok_or(WireError("invalid chunk size"))?;
                    self.state = if size == 0 { Chunk::Trailers } else { Chunk::Data(size) };
                }
                Chunk::Trailers => {
                    let Some(line) = take_line(buf, MAX_TRAILERS, "trailer section too long")? else { return Ok(()) };
                    self.trailer_bytes += line.len() + 2;
                    if self.trailer_bytes > MAX_TRAILERS {
                        return Err(WireError("trailer section too long"));
                    }
                    if line.is_empty() {
                        self.state = Chunk::Done;
                    }
                }
            }
        }
    }
}

/// Takes one CRLF-terminated line off `buf` (without the CRLF); `None` when it is not
/// complete yet.
/// The next CRLF-ended line of `buf`, taken with its CRLF; `None` until one is complete. A
/// bare LF fails at once (a line it ended would never end otherwise, and the response
/// would wait for the read timeout), as does a line longer than `max`.
fn take_line(buf: &mut BytesMut, max: usize, too_long: &'static str) -> Result<Option<BytesMut>, WireError> {
    match buf.iter().position(|&b| b == b'\n') {
        Some(end) if end > 0 && buf[end - 1] == b'\r' => {
            let line = buf.split_to(end - 1);
            buf.advance(2);
            Ok(Some(line))
        }
        Some(_) => Err(WireError("a line of the chunked framing ends in a bare LF")),
        None if buf.len() > max => Err(WireError(too_long)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
