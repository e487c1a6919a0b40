//! An HTTP/2 request whose `DATA` frames add up to more (or fewer) bytes than its
//! `content-length` is malformed (RFC 9113 §8.1.1), and an intermediary must not forward it:
//! the origin never gets it as a complete request, however the frames fall. Well-formed
//! requests still go through whole, whether `END_STREAM` comes with the last data or after it.
//! Real sockets on 127.0.0.1: an h2 client and an origin that reports what it read.

mod common;

use bytes::Bytes;
use common::Harness;
use sluice_proxy::config::{Mode, RouteConfig};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// What the origin saw of a request.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Its head arrived.
    Head,
    /// The whole body its `Content-Length` announced (answered `200`).
    Complete(Vec<u8>),
    /// The connection ended after this many bytes of the body, short of its length.
    Cut(usize),
}

/// An origin reading HTTP/1.1 requests with a `Content-Length` body, reporting each step.
async fn reporting_origin() -> (SocketAddr, mpsc::UnboundedReceiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (report, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let report = report.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let head_end = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break end + 4;
                        }
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length:"))
                        .map_or(0, |value| value.trim().parse().unwrap());
                    buf.drain(..head_end);
                    let _ = report.send(Seen::Head);
                    while buf.len() < length {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => {
                                let _ = report.send(Seen::Cut(buf.len()));
                                return;
                            }
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let _ = report.send(Seen::Complete(buf.drain(..length).collect()));
                    if conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// A reverse proxy in front of the reporting origin, and an HTTP/2 connection to it.
async fn through_the_proxy() -> (Harness, mpsc::UnboundedReceiver<Seen>, h2::client::SendRequest<Bytes>) {
    let (origin, seen) = reporting_origin().await;
    let h = Harness::build(Mode::Reverse, |c| {
        c.route = vec![RouteConfig { origin: Some(format!("http://{origin}")), ..RouteConfig::default() }];
    })
    .await;
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    (h, seen, client)
}

fn post(h: &Harness, length: usize) -> http::Request<()> {
    http::Request::post(format!("http://{}/upload", h.addr())).header("content-length", length).body(()).unwrap()
}

/// The next thing the origin reports (the deadline only bounds a failing test).
async fn next(seen: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(10), seen.recv()).await.expect("the origin reports").unwrap()
}

/// A POST announcing 5 bytes sent with all of them, `hello`, but not `END_STREAM`, once the
/// origin has its head: the request is on its way.
async fn hello_not_ended(
    h: &Harness,
    seen: &mut mpsc::UnboundedReceiver<Seen>,
    client: &h2::client::SendRequest<Bytes>,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let mut client = client.clone().ready().await.unwrap();
    let (response, mut send) = client.send_request(post(h, 5), false).unwrap();
    send.send_data(Bytes::from_static(b"hello"), false).unwrap();
    assert_eq!(next(seen).await, Seen::Head);
    (response, send)
}

#[tokio::test]
async fn rfc9113_8_1_1_data_past_the_content_length_never_reaches_the_origin_as_a_complete_request() {
    let (h, mut seen, client) = through_the_proxy().await;
    let (response, mut send) = hello_not_ended(&h, &mut seen, &client).await;
    // One byte more: the request was malformed all along.
    send.send_data(Bytes::from_static(b"!"), true).unwrap();
    let failed = tokio::time::timeout(Duration::from_secs(10), response).await.expect("the stream ends");
    assert!(failed.is_err(), "the stream is reset, not answered: {failed:?}");
    match next(&mut seen).await {
        Seen::Cut(read) => assert!(read < 5, "{read} bytes"),
        other => panic!("the origin got {other:?}"),
    }

    // Fewer bytes than announced, then the end: malformed too, and cut short at the origin.
    let mut short = client.clone().ready().await.unwrap();
    let (response, mut send) = short.send_request(post(&h, 5), false).unwrap();
    send.send_data(Bytes::from_static(b"hel"), false).unwrap();
    assert_eq!(next(&mut seen).await, Seen::Head);
    send.send_data(Bytes::new(), true).unwrap();
    let failed = tokio::time::timeout(Duration::from_secs(10), response).await.expect("the stream ends");
    assert!(failed.is_err(), "the stream is reset, not answered: {failed:?}");
    match next(&mut seen).await {
        Seen::Cut(read) => assert!(read < 5, "{read} bytes"),
        other => panic!("the origin got {other:?}"),
    }

    // The connection and the proxy go on with well-formed requests.
    let mut client = client.ready().await.unwrap();
    let (response, mut send) = client.send_request(post(&h, 5), false).unwrap();
    send.send_data(Bytes::from_static(b"hel"), false).unwrap();
    send.send_data(Bytes::from_static(b"lo"), true).unwrap();
    assert_eq!(response.await.expect("an answer").status(), 200);
    assert_eq!(next(&mut seen).await, Seen::Head);
    assert_eq!(next(&mut seen).await, Seen::Complete(b"hello".to_vec()));
}

#[tokio::test]
async fn rfc9113_8_1_1_a_request_ended_after_its_last_data_goes_through_whole() {
    let (h, mut seen, client) = through_the_proxy().await;
    let (response, mut send) = hello_not_ended(&h, &mut seen, &client).await;
    // END_STREAM alone, in an empty DATA frame: it confirms the length, and the held piece goes.
    send.send_data(Bytes::new(), true).unwrap();
    assert_eq!(response.await.expect("an answer").status(), 200);
    assert_eq!(next(&mut seen).await, Seen::Complete(b"hello".to_vec()));

    // Ended by trailers.
    let (response, mut send) = hello_not_ended(&h, &mut seen, &client).await;
    send.send_trailers(http::HeaderMap::new()).unwrap();
    assert_eq!(response.await.expect("an answer").status(), 200);
    assert_eq!(next(&mut seen).await, Seen::Complete(b"hello".to_vec()));
}
