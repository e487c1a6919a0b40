//! Protocol upgrades through the proxy (RFC 9110 §7.8): WebSocket handshakes pass to the
//! origin with their `Upgrade`, and after its 101 the bytes flow both ways; over HTTP/2, by
//! extended CONNECT (RFC 8441), sent on to the origin as HTTP/1.1 upgrades.

mod common;

use common::Harness;
use sluice_proxy::config::{Mode, RouteConfig};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The handshake example of RFC 6455 §1.3: a key and the accept value that answers it.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// A masked ping frame with no payload (RFC 6455 §5.5.2). What a client sends after the
/// 101 starts with such a frame header, never with bytes that could begin an HTTP/1 request,
/// which is how the client connection's framing checks (`framing.rs`) know to stop.
const PING: [u8; 6] = [0x89, 0x80, 0x12, 0x34, 0x56, 0x78];

/// A WebSocket origin: it switches when asked to (`Upgrade: websocket`), answering the key
/// as RFC 6455 says (but with the accept value of [`KEY`] whatever the key on a path with
/// `/wrong-accept` in it), then echoes every byte; it refuses a path with `/refuse` in it
/// with a 403, and any request without an upgrade with a 426. It keeps the request heads it
/// got.
struct EchoOrigin {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl EchoOrigin {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&heads);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&kept)));
            }
        });
        Self { addr, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

async fn serve(mut stream: TcpStream, heads: Arc<Mutex<Vec<String>>>) {
    let Some((head, rest)) = read_head(&mut stream).await else { return };
    heads.lock().unwrap().push(head.clone());
    let lower = head.to_ascii_lowercase();
    if head.split(' ').nth(1).is_some_and(|path| path.contains("/refuse")) {
        let _ = stream.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\n\r\nrefused").await;
        return;
    }
    if !lower.contains("\r\nupgrade: websocket") {
        let _ = stream.write_all(b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n").await;
        return;
    }
    let key = field(&head, "sec-websocket-key").unwrap_or_default();
    let wrong = head.split(' ').nth(1).is_some_and(|path| path.contains("/wrong-accept"));
    let accept = if wrong { ACCEPT.to_owned() } else { accept_for(key) };
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
    );
    stream.write_all(answer.as_bytes()).await.unwrap();
    stream.write_all(&rest).await.unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads a message head; returns it (without the blank line) and the bytes read after it.
async fn read_head(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).into_owned();
            return Some((head, data[end + 4..].to_vec()));
        }
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.ok()?.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
}

/// A reverse proxy whose `/ws` route goes to `ws` (everything else to the harness origin).
async fn reverse_to(ws: &EchoOrigin) -> Harness {
    reverse_to_with(ws, |_| {}).await
}

/// [`reverse_to`], with `tweak` applied to the configuration.
async fn reverse_to_with(ws: &EchoOrigin, tweak: impl FnOnce(&mut sluice_proxy::config::Config)) -> Harness {
    let route =
        RouteConfig { path_prefix: "/ws".into(), origin: Some(format!("http://{}", ws.addr)), ..Default::default() };
    Harness::build(Mode::Reverse, |c| {
        c.route.insert(0, route);
        tweak(c);
    })
    .await
}

/// Sends an opening handshake for `target` through `proxy`; returns the connection and the
/// answer's head.
async fn handshake(proxy: SocketAddr, target: &str, extra: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: chat.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (head, rest) = read_head(&mut stream).await.expect("an answer");
    assert!(rest.is_empty() || !head.starts_with("HTTP/1.1 101"), "nothing before the client speaks");
    (stream, head)
}

/// Writes `data` and reads back as many bytes.
async fn echo(stream: &mut TcpStream, data: &[u8]) -> Vec<u8> {
    stream.write_all(data).await.unwrap();
    let mut back = vec![0u8; data.len()];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back)).await.unwrap().unwrap();
    back
}

/// RFC 6455 §4.2.2: the accept value answering `key`.
fn accept_for(key: &str) -> String {
    use base64::Engine;
    use sha1::Digest;
    let hash = sha1::Sha1::new().chain_update(key).chain_update("258EAFA5-E914-47DA-95CA-C5AB0DC85B11").finalize();
    base64::engine::general_purpose::STANDARD.encode(hash)
}

/// Until every tunnel through `h` has closed.
async fn tunnels_closed(h: &Harness) {
    h.eventually("the tunnel closed", |h| {
        h.proxy.state().metrics.tunnels_open.load(std::sync::atomic::Ordering::Relaxed) == 0
    })
    .await;
}

fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test]
async fn rfc9110_7_8_a_websocket_handshake_switches_and_bytes_flow_both_ways() {
    let ws = EchoOrigin::start().await;
    let h = reverse_to(&ws).await;
    let (mut stream, head) = handshake(h.addr(), "/ws/chat", "").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(field(&head, "sec-websocket-accept"), Some(ACCEPT));
    assert!(field(&head, "upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket")), "{head}");
    assert!(field(&head, "connection").is_some_and(|v| v.eq_ignore_ascii_case("upgrade")), "{head}");
    assert!(field(&head, "via").is_some_and(|v| v.contains("sluice")), "{head}");
    // A masked text frame "hello" (RFC 6455 §5.7), then a larger binary frame: the origin
    // echoes bytes, whatever they are.
    let frame = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
    assert_eq!(echo(&mut stream, &frame).await, frame);
    assert_eq!(echo(&mut stream, &PING).await, PING);
    let large: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    assert_eq!(echo(&mut stream, &large).await, large);
    let sent = ws.heads();
    assert_eq!(sent.len(), 1);
    let upstream = &sent[0];
    assert!(upstream.starts_with("GET /ws/chat HTTP/1.1"), "{upstream}");
    assert_eq!(field(upstream, "upgrade"), Some("websocket"));
    assert_eq!(field(upstream, "connection"), Some("upgrade"));
    assert_eq!(field(upstream, "sec-websocket-key"), Some(KEY));
    assert!(field(upstream, "x-forwarded-for").is_some(), "{upstream}");
    drop(stream);
    tunnels_closed(&h).await;
}

#[tokio::test]
async fn a_forward_proxy_passes_websocket_handshakes_in_absolute_form() {
    let ws = EchoOrigin::start().await;
    let h = Harness::forward().await;
    let (mut stream, head) = handshake(h.addr(), &format!("http://{}/socket", ws.addr), "").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(echo(&mut stream, &PING).await, PING);
    assert!(ws.heads()[0].starts_with("GET /socket HTTP/1.1"));
}

#[tokio::test]
async fn an_origin_that_refuses_the_switch_is_answered_as_usual() {
    let ws = EchoOrigin::start().await;
    let h = reverse_to(&ws).await;
    let mut stream = TcpStream::connect(h.addr()).await.unwrap();
    let request = format!(
        "GET /ws/refuse HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (head, mut body) = read_head(&mut stream).await.unwrap();
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(field(&head, "content-length"), Some("7"));
    while body.len() < 7 {
        let mut buf = [0u8; 64];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the body");
        body.extend_from_slice(&buf[..n]);
    }
    assert_eq!(body, b"refused");
    // The connection stays HTTP: a next request on it is answered.
    stream.write_all(b"GET /plain HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    let (head, _) = read_head(&mut stream).await.unwrap();
    assert!(head.starts_with("HTTP/1.1 "), "{head}");
}

#[tokio::test]
async fn protocols_not_allowed_go_on_as_plain_requests() {
    let ws = EchoOrigin::start().await;
    let h = reverse_to_with(&ws, |c| c.access.upgrade_protocols.clear()).await;
    let (_stream, head) = handshake(h.addr(), "/ws/chat", "").await;
    assert!(head.starts_with("HTTP/1.1 426"), "the origin saw no Upgrade: {head}");
    assert_eq!(field(&ws.heads()[0], "upgrade"), None);
    // Allowed, but offered together with a protocol that is not: plain too.
    let h = reverse_to(&ws).await;
    let mut stream = TcpStream::connect(h.addr()).await.unwrap();
    let request = format!(
        "GET /ws/chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket, h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (head, _) = read_head(&mut stream).await.unwrap();
    assert!(head.starts_with("HTTP/1.1 426"), "{head}");
}

/// An HTTP/2 client (prior knowledge) of `proxy`, once the proxy's SETTINGS have arrived
/// (a first request answered), and the connection's task.
async fn http2_client(
    proxy: SocketAddr,
) -> (h2::client::SendRequest<bytes::Bytes>, tokio::task::JoinHandle<Result<(), h2::Error>>) {
    let tcp = TcpStream::connect(proxy).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let request = http::Request::get(format!("http://{proxy}/settings")).body(()).unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    response.await.expect("a first answer");
    (client, connection)
}

/// Reads `n` bytes from an HTTP/2 stream, giving the flow-control window back.
async fn receive(stream: &mut h2::RecvStream, n: usize) -> Vec<u8> {
    let mut data = Vec::new();
    while data.len() < n {
        let chunk = stream.data().await.expect("data").unwrap();
        let _ = stream.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    data
}

/// An extended CONNECT for `protocol` to `path` (RFC 8441 §4), as a browser sends it.
fn extended_connect(proxy: SocketAddr, path: &str, protocol: &str) -> http::Request<()> {
    let mut request = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("http://{proxy}{path}"))
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "chat")
        .body(())
        .unwrap();
    request.extensions_mut().insert(h2::ext::Protocol::from(protocol));
    request
}

#[tokio::test]
async fn rfc8441_a_websocket_over_http2_goes_to_the_origin_as_an_http1_upgrade() {
    let ws = EchoOrigin::start().await;
    let h = reverse_to(&ws).await;
    let (client, _connection) = http2_client(h.addr()).await;
    assert!(client.is_extended_connect_protocol_enabled(), "SETTINGS_ENABLE_CONNECT_PROTOCOL");
    let mut client = client.ready().await.unwrap();
    let (response, mut to_origin) =
        client.send_request(extended_connect(h.addr(), "/ws/chat", "websocket"), false).unwrap();
    let response = response.await.expect("an answer");
    assert_eq!(response.status(), http::StatusCode::OK, "RFC 8441 §5: a 2xx opens the stream");
    assert_eq!(response.headers().get("sec-websocket-protocol").map(|v| v.as_bytes()), Some(&b"chat"[..]));
    for gone in ["sec-websocket-accept", "upgrade", "connection"] {
        assert!(response.headers().get(gone).is_none(), "{gone}: {:?}", response.headers());
    }
    let upstream = &ws.heads()[0];
    assert!(upstream.starts_with("GET /ws/chat HTTP/1.1"), "{upstream}");
    assert_eq!(field(upstream, "upgrade"), Some("websocket"));
    assert_eq!(field(upstream, "connection"), Some("upgrade"));
    assert_eq!(field(upstream, "sec-websocket-version"), Some("13"));
    assert_eq!(field(upstream, "sec-websocket-protocol"), Some("chat"));
    let key = field(upstream, "sec-websocket-key").expect("the proxy makes a key");
    assert_eq!(base64::Engine::decode(&base64::engine::general_purpose::STANDARD, key).unwrap().len(), 16);
    // Frames both ways over the stream (the origin echoes).
    let mut from_origin = response.into_body();
    let frame = bytes::Bytes::from_static(&[0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]);
    for _ in 0..3 {
        to_origin.send_data(frame.clone(), false).unwrap();
        assert_eq!(receive(&mut from_origin, frame.len()).await, frame);
    }
    to_origin.send_data(bytes::Bytes::new(), true).unwrap();
    tunnels_closed(&h).await;
}

#[tokio::test]
async fn rfc8441_a_quiet_websocket_keeps_its_http2_connection_past_the_idle_timeout() {
    // The stream is a request in progress for as long as its tunnel lives: the connection's
    // idle timeout (`client.header_read_timeout`) does not apply; the tunnel's own does.
    let ws = EchoOrigin::start().await;
    let h = reverse_to_with(&ws, |c| {
        c.client.header_read_timeout = sluice_proxy::units::Dur(Duration::from_millis(200));
    })
    .await;
    let (client, connection) = http2_client(h.addr()).await;
    let mut client = client.ready().await.unwrap();
    let (response, mut to_origin) =
        client.send_request(extended_connect(h.addr(), "/ws/quiet", "websocket"), false).unwrap();
    let mut from_origin = response.await.unwrap().into_body();
    to_origin.send_data(bytes::Bytes::from_static(&PING), false).unwrap();
    assert_eq!(receive(&mut from_origin, PING.len()).await, PING);
    // Quiet for five idle timeouts: the time passing is what is tested.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!connection.is_finished(), "the connection was closed as idle");
    to_origin.send_data(bytes::Bytes::from_static(&PING), false).unwrap();
    assert_eq!(receive(&mut from_origin, PING.len()).await, PING);
}

#[tokio::test]
async fn rfc8441_an_origin_whose_accept_value_does_not_answer_the_key_is_a_502() {
    let ws = EchoOrigin::start().await;
    let h = reverse_to(&ws).await;
    let (client, _connection) = http2_client(h.addr()).await;
    let mut client = client.ready().await.unwrap();
    let (response, _) =
        client.send_request(extended_connect(h.addr(), "/ws/wrong-accept", "websocket"), false).unwrap();
    assert_eq!(response.await.unwrap().status(), http::StatusCode::BAD_GATEWAY);
    // A refusal is passed on as any answer.
    let (response, _) = client.send_request(extended_connect(h.addr(), "/ws/refuse", "websocket"), false).unwrap();
    assert_eq!(response.await.unwrap().status(), http::StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn rfc8441_extended_connect_needs_an_allowed_protocol() {
    let ws = EchoOrigin::start().await;
    let h = reverse_to(&ws).await;
    let (client, _connection) = http2_client(h.addr()).await;
    let mut client = client.ready().await.unwrap();
    let (response, _) = client.send_request(extended_connect(h.addr(), "/ws/chat", "chat-v2"), false).unwrap();
    assert_eq!(response.await.unwrap().status(), http::StatusCode::FORBIDDEN);
    assert!(ws.heads().is_empty(), "nothing reached the origin");
    // With no protocol allowed, HTTP/2 listeners do not offer extended CONNECT at all.
    let h = reverse_to_with(&ws, |c| c.access.upgrade_protocols.clear()).await;
    let (client, _connection) = http2_client(h.addr()).await;
    assert!(!client.is_extended_connect_protocol_enabled());
}

#[tokio::test]
async fn rfc8441_a_forward_proxy_passes_websockets_over_http2() {
    let ws = EchoOrigin::start().await;
    let h = Harness::forward().await;
    let (client, _connection) = http2_client(h.addr()).await;
    let mut client = client.ready().await.unwrap();
    let mut request = extended_connect(h.addr(), "/socket", "websocket");
    *request.uri_mut() = format!("http://{}/socket", ws.addr).parse().unwrap();
    let (response, mut to_origin) = client.send_request(request, false).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), http::StatusCode::OK);
    assert!(ws.heads()[0].starts_with("GET /socket HTTP/1.1"));
    to_origin.send_data(bytes::Bytes::from_static(&PING), false).unwrap();
    assert_eq!(receive(&mut response.into_body(), PING.len()).await, PING);
}

#[test]
fn the_check_refuses_protocol_names_with_versions() {
    let mut config = sluice_proxy::config::Config::default();
    config.access.upgrade_protocols = vec!["websocket/13".into()];
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("upgrade_protocols"), "{err}");
}
