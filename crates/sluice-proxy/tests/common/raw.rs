//! Requests on a connection the test holds open (to see what happens to it across a
//! reload, a shutdown or a closed listener), written and read as raw HTTP/1.1.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `GET path` on the open connection `conn`; returns the response's head and body.
pub async fn get_on(conn: &mut tokio::net::TcpStream, path: &str) -> String {
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes()).await.unwrap();
    read_response(conn).await
}

/// Reads one response with a `Content-Length` from `conn`; returns its head and body.
pub async fn read_response(conn: &mut tokio::net::TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>()))
                .expect("content-length")
                .unwrap();
            if got.len() >= end + 4 + length {
                return text;
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "closed early: {text}");
        got.extend_from_slice(&buf[..n]);
    }
}
