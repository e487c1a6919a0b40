//! Clients for tests: an HTTP/1.1 client that can speak to a forward proxy (absolute-form
//! request targets) or a reverse proxy, and a raw socket exchange for malformed input.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A complete response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The value of header `name`, as text ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on a new connection to `proxy`. `target` is sent as the request target as
/// is: an absolute URL for a forward proxy, a path for a reverse proxy.
pub async fn send(
    proxy: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let stream = TcpStream::connect(proxy).await.expect("connect to proxy");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    let mut builder = Request::builder().method(Method::from_bytes(method.as_bytes()).expect("method")).uri(target);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        let host = target
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.authority().map(|a| a.to_string()))
            .unwrap_or_else(|| proxy.to_string());
        builder = builder.header("host", host);
    }
    let body = match body {
        Some(b) => http_body_util::Either::Left(Full::new(Bytes::from(b.to_owned()))),
        None => http_body_util::Either::Right(Empty::<Bytes>::new()),
    };
    let response = sender.send_request(builder.body(body).expect("request")).await.expect("response");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    Reply { status: parts.status, headers: parts.headers, body }
}

/// GET `target` through `proxy` with extra `headers`.
pub async fn get(proxy: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Reply {
    send(proxy, "GET", target, headers, None).await
}

/// Writes `raw` bytes to `addr` and reads until the server closes or 2 s of silence;
/// returns everything read as text.
pub async fn raw(addr: SocketAddr, raw: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(raw).await.expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Two GETs of `target` (absolute, for a forward proxy) written at once on one connection to
/// `proxy`, the second closing it; the text of each answer, from its status code on. A
/// response framed wrong (a length its body does not have) shows in the second.
pub async fn two_on_one_connection(proxy: SocketAddr, target: &str) -> Vec<String> {
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: x\r\n\r\nGET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let answer = raw(proxy, request.as_bytes()).await;
    answer.split("HTTP/1.1 ").skip(1).map(str::to_owned).collect()
}

/// Asserts that `answer` (one of [`two_on_one_connection`]'s) is a `200` framed by the proxy,
/// whatever framing fields a module set: `body` with its own `Content-Length`, no
/// `Transfer-Encoding`, and no `Connection: close, x-listed` (the fields the framing tests'
/// modules set, besides the end-to-end `x-listed: 1` that does go out).
pub fn assert_framed_by_the_proxy(answer: &str, body: &str) {
    assert!(answer.starts_with("200"), "{answer}");
    assert!(answer.contains(&format!("\r\ncontent-length: {}\r\n", body.len())), "{answer}");
    assert!(answer.ends_with(&format!("\r\n\r\n{body}")), "{answer:?}");
    for gone in ["\r\ntransfer-encoding:", "\r\nconnection: close, x-listed"] {
        assert!(!answer.contains(gone), "{gone}: {answer}");
    }
    assert!(answer.contains("\r\nx-listed: 1\r\n"), "the end-to-end field the module set: {answer}");
}
