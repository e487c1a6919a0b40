//! Between Sluice's message heads and ext_proc's header messages: building `HttpHeaders`
//! (pseudo-headers first, values in `raw_value`, as Envoy sends them), applying a
//! `HeaderMutation` the way Envoy's ext_proc filter does, and turning an `ImmediateResponse`
//! into a local response.

use crate::pb::envoy::config::core::v3::{header_value_option::HeaderAppendAction, HeaderMap as PbHeaderMap};
use crate::pb::envoy::config::core::v3::{HeaderValue as PbHeaderValue, HeaderValueOption};
use crate::pb::envoy::service::ext_proc::v3::{HeaderMutation, HttpHeaders, ImmediateResponse};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{request, response, StatusCode, Uri};
use sluice_http::framing::{self, ResponseFieldWrite};
use sluice_module::LocalResponse;

fn entry(key: &str, value: &[u8]) -> PbHeaderValue {
    PbHeaderValue { key: key.to_owned(), value: String::new(), raw_value: value.to_vec() }
}

fn push_fields(out: &mut Vec<PbHeaderValue>, headers: &HeaderMap) {
    for (name, value) in headers {
        out.push(entry(name.as_str(), value.as_bytes()));
    }
}

/// True when a request head announces a body.
fn request_has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

/// The request head as ext_proc's `request_headers`: `:method`, `:scheme`, `:authority`,
/// `:path` (none for CONNECT), then every field, lower-case, one entry per value.
pub fn request_message(parts: &request::Parts) -> HttpHeaders {
    let mut fields = Vec::with_capacity(parts.headers.len() + 4);
    fields.push(entry(":method", parts.method.as_str().as_bytes()));
    let scheme = parts.uri.scheme_str().unwrap_or("http");
    fields.push(entry(":scheme", scheme.as_bytes()));
    let authority = parts
        .uri
        .authority()
        .map(|a| a.as_str().as_bytes().to_vec())
        .or_else(|| parts.headers.get(header::HOST).map(|h| h.as_bytes().to_vec()));
    if let Some(authority) = authority {
        fields.push(entry(":authority", &authority));
    }
    if parts.method != http::Method::CONNECT {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        fields.push(entry(":path", path.as_bytes()));
    }
    push_fields(&mut fields, &parts.headers);
    HttpHeaders { headers: Some(PbHeaderMap { headers: fields }), end_of_stream: !request_has_body(&parts.headers) }
}

/// The response head as ext_proc's `response_headers`: `:status`, then every field.
pub fn response_message(parts: &response::Parts) -> HttpHeaders {
    let mut fields = Vec::with_capacity(parts.headers.len() + 1);
    fields.push(entry(":status", parts.status.as_str().as_bytes()));
    push_fields(&mut fields, &parts.headers);
    let bodyless = !framing::status_has_body(parts.status)
        || parts.headers.get(header::CONTENT_LENGTH).is_some_and(|v| v.as_bytes() == b"0");
    HttpHeaders { headers: Some(PbHeaderMap { headers: fields }), end_of_stream: bodyless }
}

/// The value of a header entry: `raw_value`, or `value` when `raw_value` is empty. `None`
/// when both are set (Envoy rejects that).
fn value_of(header: &PbHeaderValue) -> Option<&[u8]> {
    match (header.value.is_empty(), header.raw_value.is_empty()) {
        (false, false) => None,
        (true, _) => Some(&header.raw_value),
        (false, true) => Some(header.value.as_bytes()),
    }
}

/// What [`apply`] did, for logs and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    pub changed: usize,
    pub rejected: usize,
}

/// Which head a mutation applies to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A request head, or a local answer's (which the host frames whole).
    Other,
    /// A proxied response head, whose framing fields are the host's.
    Response,
}

/// Applies `mutation` to `headers` as Envoy's ext_proc filter does: removals first, then
/// sets. A set uses `append_action` when it is not the default, else the deprecated `append`
/// (default false: replace). Empty values are dropped unless `keep_empty_value`. `host` and
/// pseudo-headers are never removed; a set of a pseudo-header goes to `pseudo`, which returns
/// whether it took it (`:path` on requests, `:status` on responses); other pseudo-headers and
/// `host` are ignored, like Envoy's default mutation rules. On a response, the framing
/// fields are the host's (`sluice_http::framing`): sets of hop-by-hop fields are rejected,
/// and a `Content-Length` other than the head's removes the field. Invalid names or values
/// are skipped and counted.
fn apply(
    mutation: &HeaderMutation,
    headers: &mut HeaderMap,
    target: Target,
    mut pseudo: impl FnMut(&str, &[u8]) -> bool,
) -> Applied {
    let mut applied = Applied::default();
    for name in &mutation.remove_headers {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with(':') || lower == "host" {
            applied.rejected += 1;
            continue;
        }
        match HeaderName::from_bytes(lower.as_bytes()) {
            Ok(name) => {
                if headers.remove(&name).is_some() {
                    applied.changed += 1;
                }
            }
            Err(_) => applied.rejected += 1,
        }
    }
    for option in &mutation.set_headers {
        let Some(header) = &option.header else { continue };
        let Some(value) = value_of(header) else {
            applied.rejected += 1;
            continue;
        };
        if value.is_empty() && !option.keep_empty_value {
            continue;
        }
        let key = header.key.to_ascii_lowercase();
        if key.starts_with(':') {
            if pseudo(&key, value) {
                applied.changed += 1;
            } else {
                applied.rejected += 1;
            }
            continue;
        }
        if key == "host" {
            applied.rejected += 1;
            continue;
        }
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(key.as_bytes()), HeaderValue::from_bytes(value)) else {
            applied.rejected += 1;
            continue;
        };
        if target == Target::Response {
            match framing::response_field_write(&name) {
                ResponseFieldWrite::Take => {}
                ResponseFieldWrite::Ignore => {
                    applied.rejected += 1;
                    continue;
                }
                ResponseFieldWrite::Length => {
                    framing::write_length(headers, &value);
                    applied.changed += 1;
                    continue;
                }
            }
        }
        use HeaderAppendAction::*;
        let done = match (action(option), headers.contains_key(&name)) {
            (AppendIfExistsOrAdd, _) => {
                headers.append(name, value);
                true
            }
            (AddIfAbsent, false) | (OverwriteIfExistsOrAdd, _) | (OverwriteIfExists, true) => {
                headers.insert(name, value);
                true
            }
            (AddIfAbsent, true) | (OverwriteIfExists, false) => false,
        };
        applied.changed += usize::from(done);
    }
    applied
}

/// The effective action of a set: `append_action` when set to something other than the
/// default, else `append` (unset means false: overwrite), as Envoy's ext_proc filter reads it.
fn action(option: &HeaderValueOption) -> HeaderAppendAction {
    match HeaderAppendAction::try_from(option.append_action) {
        Ok(HeaderAppendAction::AppendIfExistsOrAdd) | Err(_) => {
            if option.append.unwrap_or(false) {
                HeaderAppendAction::AppendIfExistsOrAdd
            } else {
                HeaderAppendAction::OverwriteIfExistsOrAdd
            }
        }
        Ok(other) => other,
    }
}

/// Applies a mutation to a request head; `:path` rewrites the path and query.
pub fn apply_request(mutation: &HeaderMutation, parts: &mut request::Parts) -> Applied {
    let mut uri = parts.uri.clone();
    let applied = apply(mutation, &mut parts.headers, Target::Other, |key, value| {
        if key != ":path" {
            return false;
        }
        let Ok(path) = std::str::from_utf8(value) else { return false };
        if !path.starts_with('/') {
            return false;
        }
        let mut builder = Uri::builder();
        if let Some(scheme) = uri.scheme() {
            builder = builder.scheme(scheme.clone());
        }
        if let Some(authority) = uri.authority() {
            builder = builder.authority(authority.clone());
        }
        match builder.path_and_query(path).build() {
            Ok(new) => {
                uri = new;
                true
            }
            Err(_) => false,
        }
    });
    parts.uri = uri;
    applied
}

/// Applies a mutation to a response head; `:status` changes the status. Its framing fields
/// are the host's: sets of hop-by-hop fields are rejected, a `Content-Length` other than the
/// head's removes the field.
pub fn apply_response(mutation: &HeaderMutation, parts: &mut response::Parts) -> Applied {
    let mut status = parts.status;
    let applied = apply(mutation, &mut parts.headers, Target::Response, |key, value| {
        if key != ":status" {
            return false;
        }
        match StatusCode::from_bytes(value) {
            Ok(new) if new.as_u16() >= 200 => {
                status = new;
                true
            }
            _ => false,
        }
    });
    parts.status = status;
    applied
}

/// An `ImmediateResponse` as a local response: its status (200 when missing or below 200, as
/// Envoy does), `content-type: text/plain` then its header mutation, and its body.
pub fn immediate(response: &ImmediateResponse) -> LocalResponse {
    let code = response.status.as_ref().map_or(0, |s| s.code);
    let status = u16::try_from(code)
        .ok()
        .filter(|c| *c >= 200)
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::OK);
    let mut local = LocalResponse::text(status, response.body.clone());
    if let Some(mutation) = &response.headers {
        apply(mutation, &mut local.headers, Target::Other, |_, _| false);
    }
    local
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::envoy::r#type::v3::HttpStatus;

    fn set(key: &str, value: &str, append: Option<bool>, action: HeaderAppendAction) -> HeaderValueOption {
        HeaderValueOption {
            header: Some(PbHeaderValue { key: key.into(), value: String::new(), raw_value: value.as_bytes().to_vec() }),
            append,
            append_action: action as i32,
            keep_empty_value: false,
        }
    }

    fn request(uri: &str, headers: &[(&str, &str)]) -> request::Parts {
        let mut builder = http::Request::builder().uri(uri);
        for (n, v) in headers {
            builder = builder.header(*n, *v);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn request_message_has_pseudo_headers_first_and_raw_values() {
        let parts = request("http://example.test:8080/a?b=1", &[("accept", "x/y"), ("accept", "z/w")]);
        let msg = request_message(&parts);
        let fields: Vec<(String, Vec<u8>)> =
            msg.headers.unwrap().headers.into_iter().map(|h| (h.key, h.raw_value)).collect();
        let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, [":method", ":scheme", ":authority", ":path", "accept", "accept"]);
        assert_eq!(fields[2].1, b"example.test:8080");
        assert_eq!(fields[3].1, b"/a?b=1");
        assert!(msg.end_of_stream);
        let posted = request("/p", &[("host", "h.test"), ("content-length", "3")]);
        let msg = request_message(&posted);
        assert!(!msg.end_of_stream);
        assert_eq!(msg.headers.unwrap().headers[2].raw_value, b"h.test");
    }

    #[test]
    fn mutations_follow_envoy_semantics() {
        let mut parts = request("/x", &[("a", "1"), ("b", "1"), ("c", "1"), ("gone", "1"), ("host", "h")]);
        let mutation = HeaderMutation {
            set_headers: vec![
                set("a", "2", None, HeaderAppendAction::AppendIfExistsOrAdd), // default: overwrite
                set("b", "2", Some(true), HeaderAppendAction::AppendIfExistsOrAdd), // append
                set("c", "2", None, HeaderAppendAction::AddIfAbsent),         // present: no-op
                set("d", "2", None, HeaderAppendAction::OverwriteIfExists),   // absent: no-op
                set("e", "", None, HeaderAppendAction::OverwriteIfExistsOrAdd), // empty: dropped
                set("host", "evil", None, HeaderAppendAction::OverwriteIfExistsOrAdd), // ignored
                set(":path", "/rewritten?q", None, HeaderAppendAction::OverwriteIfExistsOrAdd),
                set(":method", "POST", None, HeaderAppendAction::OverwriteIfExistsOrAdd), // ignored
            ],
            remove_headers: vec!["gone".into(), "host".into(), ":path".into()],
        };
        let applied = apply_request(&mutation, &mut parts);
        assert_eq!(parts.headers["a"], "2");
        assert_eq!(parts.headers.get_all("b").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(parts.headers["c"], "1");
        assert!(!parts.headers.contains_key("d") && !parts.headers.contains_key("e"));
        assert!(!parts.headers.contains_key("gone"));
        assert_eq!(parts.headers["host"], "h");
        assert_eq!(parts.uri, "/rewritten?q");
        assert_eq!(parts.method, http::Method::GET);
        assert_eq!(applied.rejected, 4, "{applied:?}");
    }

    #[test]
    fn both_value_fields_set_is_rejected() {
        let mut parts = request("/x", &[]);
        let mut option = set("a", "raw", None, HeaderAppendAction::OverwriteIfExistsOrAdd);
        option.header.as_mut().unwrap().value = "text".into();
        let applied = apply_request(&HeaderMutation { set_headers: vec![option], remove_headers: vec![] }, &mut parts);
        assert_eq!(applied.rejected, 1);
        assert!(parts.headers.is_empty());
    }

    #[test]
    fn response_status_can_change_and_immediate_responses_default_sensibly() {
        let mut parts = http::Response::builder().status(200).body(()).unwrap().into_parts().0;
        let mutation = HeaderMutation {
            set_headers: vec![set(":status", "404", None, HeaderAppendAction::OverwriteIfExistsOrAdd)],
            remove_headers: vec![],
        };
        apply_response(&mutation, &mut parts);
        assert_eq!(parts.status, 404);

        let local = immediate(&ImmediateResponse {
            status: Some(HttpStatus { code: 403 }),
            headers: Some(HeaderMutation {
                set_headers: vec![set("x-why", "policy", None, HeaderAppendAction::AppendIfExistsOrAdd)],
                remove_headers: vec![],
            }),
            body: b"no".to_vec(),
            grpc_status: None,
            details: String::new(),
        });
        assert_eq!(local.status, 403);
        assert_eq!(local.headers["x-why"], "policy");
        assert_eq!(local.headers["content-type"], "text/plain; charset=utf-8");
        assert_eq!(&local.body[..], b"no");
        assert_eq!(immediate(&ImmediateResponse::default()).status, 200);
    }

    #[test]
    fn a_responses_framing_fields_are_the_hosts() {
        let mut parts = http::Response::builder().header("content-length", "22").body(()).unwrap().into_parts().0;
        let action = HeaderAppendAction::OverwriteIfExistsOrAdd;
        let write_back =
            HeaderMutation { set_headers: vec![set("content-length", "22", None, action)], remove_headers: vec![] };
        assert_eq!(apply_response(&write_back, &mut parts), Applied { changed: 1, rejected: 0 });
        assert_eq!(parts.headers["content-length"], "22", "written back as it was");
        let mutation = HeaderMutation {
            set_headers: vec![
                set("transfer-encoding", "chunked", None, action),
                set("connection", "close, x-named", None, action),
                set("content-length", "5", None, action),
                set("x-named", "1", None, action),
            ],
            remove_headers: vec![],
        };
        assert_eq!(apply_response(&mutation, &mut parts), Applied { changed: 2, rejected: 2 });
        let names: Vec<&str> = parts.headers.keys().map(|name| name.as_str()).collect();
        assert_eq!(names, ["x-named"], "no length of the processor's own, no hop-by-hop fields");

        let mut req = request("/x", &[]);
        apply_request(
            &HeaderMutation { set_headers: vec![set("te", "trailers", None, action)], remove_headers: vec![] },
            &mut req,
        );
        assert_eq!(
            req.headers["te"], "trailers",
            "a request's fields are the processor's; the host frames what it sends"
        );
    }

    #[test]
    fn wire_encoding_uses_envoys_field_numbers() {
        use crate::pb::envoy::service::ext_proc::v3::{processing_request, ProcessingRequest};
        use prost::Message;
        let msg = ProcessingRequest {
            request: Some(processing_request::Request::ResponseHeaders(HttpHeaders {
                headers: Some(PbHeaderMap { headers: vec![entry("k", b"v")] }),
                end_of_stream: true,
            })),
            observability_mode: false,
        };
        // response_headers = 3 (LEN), HttpHeaders.headers = 1 (LEN), HeaderMap.headers = 1 (LEN),
        // HeaderValue.key = 1, .raw_value = 3; HttpHeaders.end_of_stream = 3 (VARINT).
        let bytes = msg.encode_to_vec();
        assert_eq!(bytes, [0x1a, 0x0c, 0x0a, 0x08, 0x0a, 0x06, 0x0a, 0x01, b'k', 0x1a, 0x01, b'v', 0x18, 0x01]);
    }
}
