//! Protocol upgrades through the proxy (RFC 9110 §7.8): WebSocket (RFC 6455), and whatever
//! else `access.upgrade_protocols` lets through; over HTTP/2, the same by extended CONNECT
//! (RFC 8441).
//!
//! `Upgrade` and `Connection` are hop-by-hop fields: a proxy passes them on only when it
//! takes part in the switch. It does for an HTTP/1.1 request without a body whose `Upgrade`
//! offers only allowed protocols and whose `Connection` lists `upgrade`, routed to an origin
//! ([`requested`]). Such a request goes to the origin on a connection of its own
//! ([`crate::upstream::Upstream::open_stream`]), never through the cache, with both fields.
//! - A `101 (Switching Protocols)` is passed on to the client, and the two connections are
//!   joined as a tunnel ([`Tunnel`]: bytes copied both ways until either side closes or
//!   `client.tunnel_idle_timeout` passes; the transaction is logged when it ends).
//! - Any other answer is passed on as an ordinary response (at most [`MAX_REFUSAL_BODY`]
//!   bytes of body), and the origin connection is closed.
//!
//! HTTP/2 has no `Upgrade` (RFC 9113 §8.6). A client that wants a WebSocket over HTTP/2 sends
//! a `CONNECT` with a `:protocol` pseudo-header (RFC 8441), which HTTP/2 listeners allow
//! (`SETTINGS_ENABLE_CONNECT_PROTOCOL`) when `access.upgrade_protocols` is not empty. It is
//! routed like a `GET` for its `:path` and goes to the origin as the HTTP/1.1 upgrade it
//! stands for: a `GET` with `Upgrade: <protocol>` and `Connection: upgrade`, and, for
//! `websocket`, a fresh `Sec-WebSocket-Key` whose answer the proxy checks (`crate::ws_key`).
//! The origin's `101` becomes a `200` on the client's stream, without `Sec-WebSocket-Accept`,
//! and the stream is joined to the origin connection. An extended CONNECT for a protocol not
//! listed is refused (`403`).
//!
//! Modules see the request phases as for any request (`req_headers`, `resolve`, `req_out`)
//! and an answer other than a 101 as any response; the 101 and the bytes after it are not
//! theirs to see, as a CONNECT's 200 and its tunnel are not. Other `Upgrade` requests, and
//! other HTTP/2 requests, are plain requests.
//!
//! After a switch, the client connection's framing checks (`crate::framing`) stop at the
//! first bytes that cannot be HTTP/1. A WebSocket client sends nothing before the 101 and
//! then frames, whose first byte is never part of a request line; a protocol whose client
//! speaks first in text would see its bytes held until its first line ends.

use crate::body::ProxyBody;
use crate::connect::Tunnel;
use crate::error::ProxyError;
use crate::outcome::ResultCode;
use crate::respond;
use crate::service::{origin_request, Forward, Routed};
use crate::state::State;
use crate::txn::{module_phase, Txn};
use crate::ws_key::{WebSocketKey, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY};
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, UPGRADE, VIA};
use http::{Method, Request, StatusCode, Version};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use sluice_module::Subject;

/// The most body an origin's refusal of a switch (a `400`, a `426`, a page) may have; it is
/// read whole before it is passed on. A longer one is a `502`.
pub const MAX_REFUSAL_BODY: usize = 1 << 20;

/// Whether `name` may be listed in `access.upgrade_protocols`: an HTTP token (RFC 9110
/// §5.6.2), without a `/version`.
pub fn is_protocol_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// How a request asks to switch protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// HTTP/1.1: `Upgrade` with `Connection: upgrade` (RFC 9110 §7.8).
    Upgrade,
    /// HTTP/2: `CONNECT` with `:protocol` (RFC 8441), sent on as an HTTP/1.1 upgrade.
    ExtendedConnect,
}

/// How `forward` asks to switch to protocols the proxy lets through (`allowed`, from
/// `access.upgrade_protocols`), if it does: an HTTP/1.1 request without a body (`has_body`),
/// for an origin, with `Connection: upgrade` and an `Upgrade` whose every protocol is allowed
/// (compared without case, a `/version` ignored); or an extended CONNECT (a `CONNECT` with
/// [`hyper::ext::Protocol`], which only HTTP/2 carries) without a body, for an origin, whose
/// protocol is allowed. (A plain `CONNECT` never gets here: it is a tunnel, `crate::connect`.)
pub fn requested(allowed: &[String], forward: &Forward, has_body: bool) -> Option<Switch> {
    let client = &forward.client;
    if client.version == Version::HTTP_11 {
        // Most requests stop at the first two tests: one header lookup on the common path.
        if !client.headers.contains_key(UPGRADE)
            || allowed.is_empty()
            || has_body
            || forward.target.origin().is_none()
            || !elements(&client.headers, &CONNECTION)
                .any(|token| token.is_some_and(|t| t.eq_ignore_ascii_case("upgrade")))
        {
            return None;
        }
        let allows = |offer: Option<&str>| {
            let name = offer.and_then(|o| o.split('/').next()).unwrap_or_default().trim();
            allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
        };
        let mut offers = elements(&client.headers, &UPGRADE).peekable();
        return (offers.peek().is_some() && offers.all(allows)).then_some(Switch::Upgrade);
    }
    if client.method != Method::CONNECT || has_body || forward.target.origin().is_none() {
        return None;
    }
    let protocol = client.extensions.get::<hyper::ext::Protocol>()?.as_str();
    allowed.iter().any(|a| a.eq_ignore_ascii_case(protocol)).then_some(Switch::ExtendedConnect)
}

/// Whether `request` is an extended CONNECT (RFC 8441): a `CONNECT` with `:protocol`.
pub fn is_extended_connect(request: &http::request::Parts) -> bool {
    request.method == Method::CONNECT && request.extensions.get::<hyper::ext::Protocol>().is_some()
}

/// The elements of the comma-separated list in the `name` fields, trimmed, empty ones left
/// out; `None` for a field that is not visible text.
fn elements<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = Option<&'a str>> + 'a {
    headers.get_all(name).into_iter().flat_map(|value| {
        let text = value.to_str().ok();
        let not_text = text.is_none().then_some(None);
        text.unwrap_or_default().split(',').map(str::trim).filter(|t| !t.is_empty()).map(Some).chain(not_text)
    })
}

/// Sends the upgrade request of `forward` to its origin (a request [`requested`] accepted, in
/// the way `switch` says) and answers: a 101 (a 200 for an extended CONNECT) with the tunnel
/// to run once it is sent, or the origin's refusal.
pub async fn open(state: &State, txn: &mut Txn, mut forward: Forward, switch: Switch) -> Result<Routed, ProxyError> {
    let client_side = forward
        .client
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ProxyError::bad_request("this connection cannot switch protocols"))?;
    let (offers, websocket_key) = match switch {
        Switch::Upgrade => (forward.client.headers.get_all(UPGRADE).iter().cloned().collect(), None),
        Switch::ExtendedConnect => {
            let protocol = forward.client.extensions.get::<hyper::ext::Protocol>().map_or("", |p| p.as_str());
            let offer = HeaderValue::from_str(protocol)
                .map_err(|_| ProxyError::bad_request("the :protocol of an extended CONNECT is not a token"))?;
            let key = protocol.eq_ignore_ascii_case("websocket").then(WebSocketKey::random);
            (vec![offer], key)
        }
    };
    let mut headers = forward.take_origin_headers(state);
    restore_upgrade(&mut headers, offers);
    if let Some(key) = &websocket_key {
        headers.insert(SEC_WEBSOCKET_KEY, key.header());
    }
    let dest = match crate::resolve::resolve(txn, &forward.target).await? {
        crate::resolve::Resolved::Connect(dest) => dest,
        crate::resolve::Resolved::Respond(local) => return Ok(Routed::Response(respond::local(state, *local))),
    };
    let Some(target) = dest.origin() else {
        return Err(ProxyError::bad_gateway("a protocol switch needs an HTTP origin"));
    };
    // The HTTP/1.1 form of an extended CONNECT is a GET (RFC 8441 §5, RFC 6455 §4.1).
    let method = if switch == Switch::ExtendedConnect { Method::GET } else { forward.client.method.clone() };
    let mut parts = origin_request(&forward.uri, method, headers)?;
    if let Some(local) =
        module_phase!(txn, Respond, Subject::Request(&mut parts), |m, info| m.req_out(info, &mut parts))?.respond
    {
        return Ok(Routed::Response(respond::local(state, *local)));
    }
    let (stream, peer) = state.upstream.open_stream(target).await?;
    txn.peer = Some(peer);
    let (mut sender, connection) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
        .await
        .map_err(|e| ProxyError::bad_gateway("cannot start HTTP/1.1 with the origin").with_cause(e))?;
    // Runs the exchange; with upgrades, it hands the connection over after a 101.
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!("origin connection of an upgrade request: {e}");
        }
    });
    let timeout = state.upstream.response_timeout(target);
    let mut response = tokio::time::timeout(timeout, sender.send_request(Request::from_parts(parts, Empty::new())))
        .await
        .map_err(|_| ProxyError::gateway_timeout(format!("no response head from the origin within {timeout:?}")))?
        .map_err(|e| ProxyError::bad_gateway("the origin failed the upgrade request").with_cause(e))?;
    txn.code = ResultCode::Miss;
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        if websocket_key.as_ref().is_some_and(|key| !key.accepts(response.headers().get(SEC_WEBSOCKET_ACCEPT))) {
            return Err(ProxyError::bad_gateway("the origin's Sec-WebSocket-Accept does not answer the key sent"));
        }
        let origin_side = hyper::upgrade::on(&mut response);
        let (mut parts, _) = response.into_parts();
        let upgraded = origin_side
            .await
            .map_err(|e| ProxyError::bad_gateway("the origin's connection did not switch protocols").with_cause(e))?;
        let switched_to: Vec<HeaderValue> = parts.headers.get_all(UPGRADE).iter().cloned().collect();
        sluice_http::hop::remove_hop_by_hop(&mut parts.headers);
        match switch {
            Switch::Upgrade => restore_upgrade(&mut parts.headers, switched_to),
            Switch::ExtendedConnect => {
                // RFC 8441 §5: a 2xx opens the stream; the accept value was for this proxy.
                parts.status = StatusCode::OK;
                parts.headers.remove(SEC_WEBSOCKET_ACCEPT);
            }
        }
        if state.config.headers.via {
            parts.headers.append(VIA, state.via(Version::HTTP_11));
        }
        let answer = http::Response::from_parts(parts, ProxyBody::empty());
        return Ok(Routed::Tunnel(answer, Tunnel::new(client_side, TokioIo::new(upgraded))));
    }
    let (mut parts, body) = response.into_parts();
    sluice_http::hop::remove_hop_by_hop(&mut parts.headers);
    if !txn.modules.is_empty() {
        let status = crate::head_framing::FramedStatus::of(&parts);
        module_phase!(txn, Nothing, Subject::Response(&mut parts), |m, info| m.origin_resp_headers(info, &mut parts))?;
        status.check(&parts)?;
    }
    let read_timeout = state.upstream.read_timeout(target);
    let body = tokio::time::timeout(read_timeout, Limited::new(body, MAX_REFUSAL_BODY).collect())
        .await
        .map_err(|_| ProxyError::gateway_timeout(format!("the origin's answer took longer than {read_timeout:?}")))?
        .map_err(|e| ProxyError::bad_gateway("reading the origin's answer to an upgrade request").with_cause(e))?
        .to_bytes();
    Ok(Routed::Response(http::Response::from_parts(parts, ProxyBody::full(body))))
}

/// Puts back the hop-by-hop fields of a switch: `Upgrade` (its field lines `offers`) and
/// `Connection: upgrade`.
fn restore_upgrade(headers: &mut HeaderMap, offers: Vec<HeaderValue>) {
    headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    for offer in offers {
        headers.append(UPGRADE, offer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_are_tokens_without_a_version() {
        for good in ["websocket", "WebSocket", "h2c", "my.proto-1"] {
            assert!(is_protocol_name(good), "{good}");
        }
        for bad in ["", "websocket/13", "web socket", "a,b"] {
            assert!(!is_protocol_name(bad), "{bad}");
        }
    }
}
