//! The Proxy-Wasm view of a message head: Envoy-style pseudo-headers plus the header map.
//!
//! A request shows `:method`, `:scheme`, `:authority` and `:path` before its headers, a
//! response shows `:status`; plugins read and set them like any header (setting `:path`
//! rewrites the URL, `:status` the status code). Removing a pseudo-header does nothing.
//! Values are raw bytes (not necessarily UTF-8). The wire format of a whole map is the ABI's:
//! a `u32` count, then a `u32` name length and `u32` value length per pair, then each name and
//! value followed by a NUL byte; all integers little-endian. A plugin may not grow a map past
//! [`MAX_HEAD_BYTES`].
//!
//! A response's framing is the host's (docs/modules.md, "Framing is the host's";
//! `sluice_http::framing`): writes of hop-by-hop fields to a response head are ignored, and a
//! `Content-Length` other than the head's removes the field. The check runs where a plugin
//! writes, so a response no plugin edits costs nothing.

use crate::abi::Status;
use crate::host::RequestView;
use crate::kept::{HeaderListIter, KeptRequest, KeptResponse};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, HOST};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{request, response, HeaderMap, Method, StatusCode, Uri};
use sluice_http::framing::{self, ResponseFieldWrite};

/// A message head as the plugin sees it: live (readable and writable) or a copy kept for
/// later callbacks (read-only; changing it gives `BadArgument`).
pub(crate) enum Head<'a> {
    Request(&'a mut request::Parts),
    Response(&'a mut response::Parts),
    KeptRequest(&'a KeptRequest),
    KeptResponse(&'a KeptResponse),
    /// gRPC metadata (read-only, no pseudo-headers).
    Metadata(&'a HeaderMap),
}

/// Most bytes (names plus values) a plugin may grow a header map to.
pub(crate) const MAX_HEAD_BYTES: usize = 256 << 10;

const REQUEST_PSEUDO: [&str; 4] = [":method", ":scheme", ":authority", ":path"];

/// The headers of a [`Head`] in order, as `(name, value)` byte strings.
enum Pairs<'a> {
    Map(http::header::Iter<'a, HeaderValue>),
    Kept(HeaderListIter<'a>),
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Pairs::Map(iter) => iter.next().map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
            Pairs::Kept(iter) => iter.next(),
        }
    }
}

impl Head<'_> {
    fn pairs(&self) -> Pairs<'_> {
        match self {
            Head::Request(parts) => Pairs::Map(parts.headers.iter()),
            Head::Response(parts) => Pairs::Map(parts.headers.iter()),
            Head::KeptRequest(kept) => Pairs::Kept(kept.headers.iter()),
            Head::KeptResponse(kept) => Pairs::Kept(kept.headers.iter()),
            Head::Metadata(map) => Pairs::Map(map.iter()),
        }
    }

    /// The live header map; `BadArgument` for a kept copy.
    fn headers_mut(&mut self) -> Result<&mut HeaderMap, Status> {
        match self {
            Head::Request(parts) => Ok(&mut parts.headers),
            Head::Response(parts) => Ok(&mut parts.headers),
            Head::KeptRequest(_) | Head::KeptResponse(_) | Head::Metadata(_) => Err(Status::BadArgument),
        }
    }

    /// The pseudo-headers this head shows.
    fn pseudo_names(&self) -> &'static [&'static str] {
        match self {
            Head::Request(_) | Head::KeptRequest(_) => &REQUEST_PSEUDO,
            Head::Response(_) | Head::KeptResponse(_) => &[":status"],
            Head::Metadata(_) => &[],
        }
    }

    /// The number of pairs, pseudo-headers included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pairs().count() + self.pseudo_names().len()
    }

    /// The value of a pseudo-header, `None` for other names.
    fn pseudo(&self, name: &[u8]) -> Option<Bytes> {
        let status = |status: StatusCode| match name {
            b":status" => Some(Bytes::copy_from_slice(status.as_str().as_bytes())),
            _ => None,
        };
        let request = match self {
            Head::Request(parts) => RequestView::Live(parts),
            Head::KeptRequest(kept) => RequestView::Kept(kept),
            Head::Response(parts) => return status(parts.status),
            Head::KeptResponse(kept) => return status(kept.status),
            Head::Metadata(_) => return None,
        };
        match name {
            b":method" => Some(Bytes::copy_from_slice(request.method().as_str().as_bytes())),
            b":scheme" => Some(Bytes::copy_from_slice(request_scheme(request).as_bytes())),
            b":authority" => Some(request_authority(request)),
            b":path" => Some(Bytes::copy_from_slice(request_path(request).as_bytes())),
            _ => None,
        }
    }

    /// The first value of `name` (case-insensitive), or the pseudo-header's value.
    pub(crate) fn get(&self, name: &[u8]) -> Option<Bytes> {
        if name.first() == Some(&b':') {
            return self.pseudo(name);
        }
        let value = match self {
            Head::Request(parts) => parts.headers.get(std::str::from_utf8(name).ok()?).map(HeaderValue::as_bytes),
            Head::Response(parts) => parts.headers.get(std::str::from_utf8(name).ok()?).map(HeaderValue::as_bytes),
            Head::KeptRequest(kept) => kept.headers.get(&HeaderName::from_bytes(name).ok()?),
            Head::KeptResponse(kept) => kept.headers.get(&HeaderName::from_bytes(name).ok()?),
            Head::Metadata(map) => map.get(std::str::from_utf8(name).ok()?).map(HeaderValue::as_bytes),
        };
        value.map(Bytes::copy_from_slice)
    }

    /// All pairs in the ABI wire format.
    pub(crate) fn serialize(&self) -> Vec<u8> {
        let pseudo: Vec<(&[u8], Bytes)> = self
            .pseudo_names()
            .iter()
            .filter_map(|name| Some((name.as_bytes(), self.pseudo(name.as_bytes())?)))
            .collect();
        let pairs = || {
            let pseudo = pseudo.iter().map(|(name, value)| (*name, value.as_ref()));
            pseudo.chain(self.pairs())
        };
        let size = pairs().fold(4, |size, (name, value)| size + 10 + name.len() + value.len());
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&(pairs().count() as u32).to_le_bytes());
        for (name, value) in pairs() {
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        }
        for (name, value) in pairs() {
            out.extend_from_slice(name);
            out.push(0);
            out.extend_from_slice(value);
            out.push(0);
        }
        out
    }

    /// Sets `name` to `value`, replacing every value it had (`proxy_replace_header_map_value`).
    pub(crate) fn replace(&mut self, name: &[u8], value: &[u8]) -> Result<(), Status> {
        if name.first() == Some(&b':') {
            return self.set_pseudo(name, value);
        }
        let (name, value) = parse_pair(name, value)?;
        self.check_room(&name, &value)?;
        if self.framing_taken(&name, &value) {
            self.headers_mut()?.insert(name, value);
        }
        Ok(())
    }

    /// Adds a value to `name`, keeping the ones it has (`proxy_add_header_map_value`).
    pub(crate) fn add(&mut self, name: &[u8], value: &[u8]) -> Result<(), Status> {
        if name.first() == Some(&b':') {
            return self.set_pseudo(name, value);
        }
        let (name, value) = parse_pair(name, value)?;
        self.check_room(&name, &value)?;
        if self.framing_taken(&name, &value) {
            self.headers_mut()?.append(name, value);
        }
        Ok(())
    }

    /// Removes every value of `name`; pseudo-headers stay.
    pub(crate) fn remove(&mut self, name: &[u8]) -> Result<(), Status> {
        if name.first() == Some(&b':') {
            return Ok(());
        }
        let name = std::str::from_utf8(name).map_err(|_| Status::BadArgument)?;
        self.headers_mut()?.remove(name);
        Ok(())
    }

    /// Replaces the whole map with `pairs` (wire format); pseudo-headers among them are set,
    /// absent ones keep their value. Nothing changes when `pairs` is malformed.
    pub(crate) fn set_all(&mut self, pairs: &[u8]) -> Result<(), Status> {
        self.headers_mut()?;
        let pairs = deserialize(pairs)?;
        if pairs.iter().map(|(name, value)| name.len() + value.len()).sum::<usize>() > MAX_HEAD_BYTES {
            return Err(Status::BadArgument);
        }
        let mut headers = HeaderMap::with_capacity(pairs.len());
        let mut pseudo = Vec::new();
        let mut lengths = Vec::new();
        let response = matches!(self, Head::Response(_));
        for (name, value) in pairs {
            if name.first() == Some(&b':') {
                pseudo.push((name, value));
                continue;
            }
            let (name, value) = parse_pair(name, value)?;
            match response.then(|| framing::response_field_write(&name)) {
                None | Some(ResponseFieldWrite::Take) => {
                    headers.append(name, value);
                }
                Some(ResponseFieldWrite::Ignore) => {}
                Some(ResponseFieldWrite::Length) => lengths.push(value),
            }
        }
        for (name, value) in pseudo {
            self.set_pseudo(name, value)?;
        }
        let old = std::mem::replace(self.headers_mut()?, headers);
        // The head's length stays only when the pairs carry it back as it was.
        if let (Some(kept), [written]) = (old.get(CONTENT_LENGTH), lengths.as_slice()) {
            if kept == written {
                self.headers_mut()?.insert(CONTENT_LENGTH, kept.clone());
            }
        }
        Ok(())
    }

    /// Whether a write of `name: value` goes ahead. On a response head the framing fields
    /// are the host's: a hop-by-hop field is not written, and `Content-Length` is taken by
    /// [`framing::write_length`] (kept when written back as it is, else removed).
    fn framing_taken(&mut self, name: &HeaderName, value: &HeaderValue) -> bool {
        let Head::Response(parts) = self else { return true };
        match framing::response_field_write(name) {
            ResponseFieldWrite::Take => true,
            ResponseFieldWrite::Ignore => false,
            ResponseFieldWrite::Length => {
                framing::write_length(&mut parts.headers, value);
                false
            }
        }
    }

    /// `BadArgument` when adding `name: value` would take the map past [`MAX_HEAD_BYTES`].
    fn check_room(&self, name: &HeaderName, value: &HeaderValue) -> Result<(), Status> {
        let used: usize = self.pairs().map(|(n, v)| n.len() + v.len()).sum();
        if used + name.as_str().len() + value.len() > MAX_HEAD_BYTES {
            return Err(Status::BadArgument);
        }
        Ok(())
    }

    fn set_pseudo(&mut self, name: &[u8], value: &[u8]) -> Result<(), Status> {
        match self {
            Head::Request(parts) => match name {
                b":method" => parts.method = Method::from_bytes(value).map_err(|_| Status::BadArgument)?,
                b":path" => {
                    let path = PathAndQuery::try_from(value).map_err(|_| Status::BadArgument)?;
                    let mut uri = std::mem::take(&mut parts.uri).into_parts();
                    uri.path_and_query = Some(path);
                    parts.uri = Uri::from_parts(uri).map_err(|_| Status::BadArgument)?;
                }
                b":authority" => {
                    let authority = Authority::try_from(value).map_err(|_| Status::BadArgument)?;
                    if parts.uri.authority().is_some() {
                        let mut uri = std::mem::take(&mut parts.uri).into_parts();
                        uri.authority = Some(authority.clone());
                        parts.uri = Uri::from_parts(uri).map_err(|_| Status::BadArgument)?;
                    }
                    if parts.uri.authority().is_none() || parts.headers.contains_key(HOST) {
                        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| Status::BadArgument)?;
                        parts.headers.insert(HOST, host);
                    }
                }
                b":scheme" => {
                    let scheme = Scheme::try_from(value).map_err(|_| Status::BadArgument)?;
                    if parts.uri.authority().is_some() {
                        let mut uri = std::mem::take(&mut parts.uri).into_parts();
                        uri.scheme = Some(scheme);
                        parts.uri = Uri::from_parts(uri).map_err(|_| Status::BadArgument)?;
                    }
                }
                _ => return Err(Status::BadArgument),
            },
            Head::Response(parts) => match name {
                b":status" => parts.status = StatusCode::from_bytes(value).map_err(|_| Status::BadArgument)?,
                _ => return Err(Status::BadArgument),
            },
            Head::KeptRequest(_) | Head::KeptResponse(_) | Head::Metadata(_) => return Err(Status::BadArgument),
        }
        Ok(())
    }
}

/// The request's scheme: the URL's, else `http`.
pub(crate) fn request_scheme(request: RequestView<'_>) -> &str {
    request.uri().scheme_str().unwrap_or("http")
}

/// The request's authority: the URL's, else the `Host` header's (may be empty).
pub(crate) fn request_authority(request: RequestView<'_>) -> Bytes {
    match request.uri().authority() {
        Some(authority) => Bytes::copy_from_slice(authority.as_str().as_bytes()),
        None => request.header(&HOST).map(Bytes::copy_from_slice).unwrap_or_default(),
    }
}

/// The request's path with its query (`/` when the URL has none).
pub(crate) fn request_path(request: RequestView<'_>) -> &str {
    request.uri().path_and_query().map(PathAndQuery::as_str).unwrap_or("/")
}

fn parse_pair(name: &[u8], value: &[u8]) -> Result<(HeaderName, HeaderValue), Status> {
    let name = HeaderName::from_bytes(name).map_err(|_| Status::BadArgument)?;
    let value = HeaderValue::from_bytes(value).map_err(|_| Status::BadArgument)?;
    Ok((name, value))
}

/// Name-value pairs borrowed from guest memory.
pub(crate) type WirePairs<'a> = Vec<(&'a [u8], &'a [u8])>;

/// Parses pairs in the ABI wire format (see the module docs); `ParseFailure` when the
/// lengths do not fit the data.
pub(crate) fn deserialize(data: &[u8]) -> Result<WirePairs<'_>, Status> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let word = |at: usize| -> Result<usize, Status> {
        let bytes = data.get(at..at + 4).ok_or(Status::ParseFailure)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
    };
    let count = word(0)?;
    let sizes_end = count.checked_mul(8).and_then(|n| n.checked_add(4)).ok_or(Status::ParseFailure)?;
    if sizes_end > data.len() {
        return Err(Status::ParseFailure);
    }
    let mut pairs = Vec::with_capacity(count);
    let mut at = sizes_end;
    let mut take = |len: usize| -> Result<&[u8], Status> {
        let end = at.checked_add(len).ok_or(Status::ParseFailure)?;
        let bytes = data.get(at..end).ok_or(Status::ParseFailure)?;
        at = end.checked_add(1).ok_or(Status::ParseFailure)?;
        Ok(bytes)
    };
    for n in 0..count {
        let name_len = word(4 + n * 8)?;
        let value_len = word(8 + n * 8)?;
        let name = take(name_len)?;
        let value = take(value_len)?;
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// Serialises owned pairs in the ABI wire format (for tests and local responses).
#[cfg(test)]
pub(crate) fn serialize_pairs(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (name, value) in pairs {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    }
    for (name, value) in pairs {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(value.as_bytes());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> request::Parts {
        let (parts, ()) = http::Request::builder()
            .method("POST")
            .uri("/a/b?c=d")
            .header("host", "example.com")
            .header("x-one", "1")
            .header("x-one", "2")
            .body(())
            .unwrap()
            .into_parts();
        parts
    }

    #[test]
    fn pseudo_headers_read_and_write_the_head() {
        let mut parts = request();
        let mut head = Head::Request(&mut parts);
        assert_eq!(head.len(), 7);
        assert_eq!(head.get(b":method").as_deref(), Some(&b"POST"[..]));
        assert_eq!(head.get(b":path").as_deref(), Some(&b"/a/b?c=d"[..]));
        assert_eq!(head.get(b":authority").as_deref(), Some(&b"example.com"[..]));
        assert_eq!(head.get(b":scheme").as_deref(), Some(&b"http"[..]));
        assert_eq!(head.get(b"X-One").as_deref(), Some(&b"1"[..]));
        head.replace(b":path", b"/new?x").unwrap();
        head.replace(b":authority", b"other.example").unwrap();
        head.replace(b":method", b"GET").unwrap();
        assert_eq!(head.replace(b":path", b"no spaces allowed"), Err(Status::BadArgument));
        head.remove(b":method").unwrap();
        assert_eq!(parts.uri, "/new?x");
        assert_eq!(parts.method, Method::GET);
        assert_eq!(parts.headers["host"], "other.example");
    }

    #[test]
    fn absolute_urls_keep_scheme_and_authority_on_path_rewrites() {
        let (mut parts, ()) = http::Request::get("http://a.example/x").body(()).unwrap().into_parts();
        let mut head = Head::Request(&mut parts);
        head.replace(b":path", b"/y").unwrap();
        head.replace(b":authority", b"b.example:8080").unwrap();
        assert_eq!(parts.uri, "http://b.example:8080/y");
    }

    #[test]
    fn maps_round_trip_through_the_wire_format() {
        let mut parts = request();
        let head = Head::Request(&mut parts);
        let wire = head.serialize();
        let pairs = deserialize(&wire).unwrap();
        let names: Vec<&[u8]> = pairs.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, [&b":method"[..], b":scheme", b":authority", b":path", b"host", b"x-one", b"x-one"]);
        assert_eq!(pairs[6].1, b"2");

        let mut head = Head::Request(&mut parts);
        head.set_all(&serialize_pairs(&[(":path", "/z"), ("x-new", "v"), ("x-new", "w")])).unwrap();
        assert_eq!(parts.uri, "/z");
        assert_eq!(parts.headers.len(), 2);
        assert!(parts.headers.get("x-one").is_none());
    }

    #[test]
    fn malformed_wire_data_is_refused_without_panicking() {
        assert_eq!(deserialize(&[1, 0, 0]), Err(Status::ParseFailure));
        assert_eq!(deserialize(&[255, 255, 255, 255]), Err(Status::ParseFailure));
        let mut wire = serialize_pairs(&[("a", "b")]);
        wire.truncate(wire.len() - 2);
        assert_eq!(deserialize(&wire), Err(Status::ParseFailure));
        let mut parts = request();
        let mut head = Head::Request(&mut parts);
        assert_eq!(head.set_all(&[9, 0, 0, 0]), Err(Status::ParseFailure));
        assert_eq!(head.add(b"bad name", b"v"), Err(Status::BadArgument));
        assert_eq!(head.add(b"x-ok", b"bad\nvalue"), Err(Status::BadArgument));
        assert_eq!(parts.headers.len(), 3);
        let big = vec![b'v'; MAX_HEAD_BYTES / 2];
        let mut head = Head::Request(&mut parts);
        assert_eq!(head.add(b"x-big", &big), Ok(()));
        assert_eq!(head.add(b"x-big", &big), Err(Status::BadArgument));
    }

    #[test]
    fn kept_copies_read_like_the_live_heads_and_refuse_changes() {
        let mut parts = request();
        let mut kept = KeptRequest::new(Default::default());
        kept.keep(&parts);
        let live = Head::Request(&mut parts).serialize();
        let mut head = Head::KeptRequest(&kept);
        assert_eq!(head.serialize(), live);
        assert_eq!(head.get(b"X-One").as_deref(), Some(&b"1"[..]));
        assert_eq!(head.get(b":authority").as_deref(), Some(&b"example.com"[..]));
        assert_eq!(head.get(b"bad name"), None);
        assert_eq!(head.add(b"x-new", b"v"), Err(Status::BadArgument));
        assert_eq!(head.replace(b":path", b"/p"), Err(Status::BadArgument));
        assert_eq!(head.set_all(&serialize_pairs(&[("a", "b")])), Err(Status::BadArgument));
        let (mut resp, ()) = http::Response::builder().status(404).header("a", "b").body(()).unwrap().into_parts();
        let mut kept = KeptResponse::new(Default::default());
        kept.keep(&resp);
        assert_eq!(Head::KeptResponse(&kept).serialize(), Head::Response(&mut resp).serialize());
        assert_eq!(Head::KeptResponse(&kept).len(), 2);
    }

    #[test]
    fn responses_expose_status() {
        let (mut parts, ()) = http::Response::builder().status(404).header("a", "b").body(()).unwrap().into_parts();
        let mut head = Head::Response(&mut parts);
        assert_eq!(head.len(), 2);
        assert_eq!(head.get(b":status").as_deref(), Some(&b"404"[..]));
        head.replace(b":status", b"200").unwrap();
        assert_eq!(head.replace(b":status", b"99"), Err(Status::BadArgument));
        assert_eq!(parts.status, StatusCode::OK);
    }

    #[test]
    fn a_responses_framing_fields_are_the_hosts() {
        let response = || {
            let builder = http::Response::builder().header("content-length", "22").header("x-kept", "1");
            builder.body(()).unwrap().into_parts().0
        };
        let mut parts = response();
        let mut head = Head::Response(&mut parts);
        head.add(b"transfer-encoding", b"chunked").unwrap();
        head.replace(b"connection", b"close, x-kept").unwrap();
        head.add(b"x-added", b"1").unwrap();
        head.replace(b"content-length", b"22").unwrap();
        assert_eq!(parts.headers["content-length"], "22", "written back as it was");
        Head::Response(&mut parts).add(b"content-length", b"5").unwrap();
        let mut names: Vec<&str> = parts.headers.keys().map(|name| name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["x-added", "x-kept"], "no length of the plugin's own, no hop-by-hop fields");

        // The whole map, read and written back with a change: the length stays.
        let mut parts = response();
        let mut head = Head::Response(&mut parts);
        let wire = head.serialize();
        let mut pairs = deserialize(&wire).unwrap();
        pairs.push((b"x-added", b"1"));
        pairs.push((b"upgrade", b"websocket"));
        let pairs: Vec<(&str, &str)> =
            pairs.iter().map(|(n, v)| (std::str::from_utf8(n).unwrap(), std::str::from_utf8(v).unwrap())).collect();
        head.set_all(&serialize_pairs(&pairs)).unwrap();
        assert_eq!(parts.headers["content-length"], "22");
        assert!(parts.headers.contains_key("x-added") && !parts.headers.contains_key("upgrade"));
        let mut head = Head::Response(&mut parts);
        head.set_all(&serialize_pairs(&[("content-length", "5"), ("x-only", "1")])).unwrap();
        let names: Vec<&str> = parts.headers.keys().map(|name| name.as_str()).collect();
        assert_eq!(names, ["x-only"]);

        // A request's fields are the plugin's to write: the host's client writes the framing
        // of the body it sends, whatever the head says (upstream/wire.rs).
        let mut parts = request();
        Head::Request(&mut parts).add(b"content-length", b"3").unwrap();
        assert_eq!(parts.headers["content-length"], "3");
    }
}
