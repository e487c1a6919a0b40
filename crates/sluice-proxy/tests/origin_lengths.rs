//! An origin's `Content-Length` as clients get it (RFC 9110 §8.6): a list of one length, or
//! the field repeated, goes on as one value, and a `204` goes on without it, on a pass and
//! on a stored response alike, over HTTP/1.1 and HTTP/2 (whose clients refuse anything else).

mod common;

use common::Harness;
use sluice_testkit::{client, Reply};

/// The origin's answers, by path: (path, reply, the body clients get).
fn answers() -> Vec<(&'static str, Reply, &'static str)> {
    vec![
        ("/list", Reply::ok("abc").header("Content-Length", "3, 3").header("Cache-Control", "no-store"), "abc"),
        ("/list-stored", Reply::ok("abc").header("Content-Length", "3,3").header("Cache-Control", "max-age=60"), "abc"),
        (
            "/repeated",
            Reply::ok("abc")
                .header("Content-Length", "3")
                .header("Content-Length", "3")
                .header("Cache-Control", "no-store"),
            "abc",
        ),
        ("/no-content", Reply::status(204, "").header("Content-Length", "5"), ""),
    ]
}

#[tokio::test]
async fn rfc9110_8_6_http1_clients_get_one_content_length_and_none_on_a_204() {
    let h = Harness::forward().await;
    for (path, reply, body) in answers() {
        h.origin.on(path, reply);
        for round in ["miss", "again"] {
            let request = format!("GET {} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", h.origin.url(path));
            let answer = client::raw(h.addr(), request.as_bytes()).await;
            let (head, got) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{path} {round}: {answer:?}"));
            let lengths: Vec<&str> = head.lines().filter_map(|l| l.strip_prefix("content-length: ")).collect();
            let expected: Vec<String> = if body.is_empty() { vec![] } else { vec![body.len().to_string()] };
            assert_eq!(lengths, expected, "{path} {round}: {head}");
            assert_eq!(got, body, "{path} {round}");
        }
    }
}

#[tokio::test]
async fn rfc9110_8_6_http2_clients_get_one_content_length_and_none_on_a_204() {
    let h = Harness::forward().await;
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    for (path, reply, body) in answers() {
        h.origin.on(path, reply);
        for round in ["miss", "again"] {
            let mut client = client.clone().ready().await.unwrap();
            let request = http::Request::get(h.origin.url(path)).body(()).unwrap();
            let (response, _) = client.send_request(request, true).unwrap();
            let response = response.await.unwrap_or_else(|e| panic!("{path} {round}: {e}"));
            let lengths: Vec<_> = response.headers().get_all("content-length").iter().cloned().collect();
            let expected: Vec<String> = if body.is_empty() { vec![] } else { vec![body.len().to_string()] };
            assert_eq!(lengths, expected, "{path} {round}");
            let mut stream = response.into_body();
            let mut got = Vec::new();
            while let Some(chunk) = stream.data().await {
                got.extend_from_slice(&chunk.unwrap_or_else(|e| panic!("{path} {round}: {e}")));
            }
            assert_eq!(got, body.as_bytes(), "{path} {round}");
        }
    }
}
