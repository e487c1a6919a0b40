//! Zero-copy disk hits (`sendfile`) through the proxy: byte-exact bodies over several
//! placeholder frames, partial sends to a slow reader, keep-alive and pipelined requests
//! mixing zero-copy and ordinary responses on one connection, ranges, and the paths that
//! must not use it. Real sockets on 127.0.0.1, a temporary directory for the disk tier.

mod common;

use common::disk::*;
use common::{cache_status, Harness};
use sluice_proxy::units::Size;
use sluice_testkit::Reply;
use std::sync::atomic::Ordering::Relaxed;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpSocket;

/// A body whose every 4-byte word is its own offset, so a misplaced or repeated range shows.
fn numbered(len: usize) -> Vec<u8> {
    (0..len / 4).flat_map(|i| (i as u32).to_be_bytes()).collect()
}

fn zero_copy_hits(h: &Harness) -> u64 {
    h.proxy.state().store.counters().zero_copy_hits.load(Relaxed)
}

/// A proxy that promotes only disk hits up to 1 KiB (larger ones are streamed from their
/// files), with `/big` (3.5 MiB: four placeholder frames) and `/small` stored on disk.
async fn proxy_with_big_object(dir: &std::path::Path, sendfile: bool) -> (Harness, Vec<u8>) {
    let h = proxy(dir, |c| {
        c.cache.disk.promote_max = Size(1024);
        c.cache.disk.sendfile = sendfile;
        c.cache.max_object = Size(8 << 20);
    })
    .await;
    let body = numbered(3_500_000);
    h.origin.on("/big", Reply::ok(body.clone()).header("cache-control", FRESH));
    h.origin.on("/small", Reply::ok("small and in memory").header("cache-control", FRESH));
    assert_eq!(h.get("/big").await.body, body);
    assert_eq!(h.get("/small").await.text(), "small and in memory");
    on_disk(&h, 2).await;
    // After a restart both are on disk only; `/small` is then promoted on its first hit.
    (restart(h).await, body)
}

#[tokio::test]
async fn a_disk_hit_is_sent_with_sendfile_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (h, body) = proxy_with_big_object(dir.path(), true).await;
    let reply = h.get("/big").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-length"), body.len().to_string());
    assert!(reply.body == body, "the body differs from the origin's");
    assert!(cache_status(&reply).contains("detail=disk"), "{}", cache_status(&reply));
    assert_eq!(zero_copy_hits(&h), 1);

    let part = h.get_with("/big", &[("range", "bytes=1048570-3145739")]).await;
    assert_eq!(part.status, 206);
    assert!(part.body == body[1_048_570..3_145_740], "the range differs");
    assert_eq!(zero_copy_hits(&h), 2);
    assert_eq!(h.origin.hits("/big"), 1);
    assert_eq!(disk(&h).open_files, 1, "the verified file is kept open for later hits");
}

#[tokio::test]
async fn with_sendfile_off_disk_hits_are_read_and_identical() {
    let dir = tempfile::tempdir().unwrap();
    let (h, body) = proxy_with_big_object(dir.path(), false).await;
    let reply = h.get("/big").await;
    assert!(reply.body == body);
    assert!(cache_status(&reply).contains("detail=disk"), "{}", cache_status(&reply));
    assert_eq!(zero_copy_hits(&h), 0);
}

/// One response read from `reader`: status code and body (by `Content-Length`).
async fn read_response(reader: &mut BufReader<tokio::net::TcpStream>) -> (u16, Vec<u8>) {
    let mut status = String::new();
    reader.read_line(&mut status).await.unwrap();
    let code = status.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("status: {status:?}"));
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.unwrap();
    (code, body)
}

#[tokio::test]
async fn pipelined_requests_to_a_slow_reader_mix_sendfile_and_ordinary_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let (h, body) = proxy_with_big_object(dir.path(), true).await;
    h.origin.on("/missing", Reply::status(404, "not here"));
    // A small receive window makes the proxy's sendfile calls return short and wait.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(h.addr()).await.unwrap();
    let mut reader = BufReader::with_capacity(1024, stream);
    let request = |path: &str, extra: &str| {
        format!("GET {} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n", h.origin.url(path), h.origin.addr)
    };
    let pipeline = [
        request("/big", ""),
        request("/small", ""),
        request("/big", "Range: bytes=5-12\r\n"),
        request("/missing", ""),
        request("/big", ""),
        request("/small", ""),
    ]
    .concat();
    reader.get_mut().write_all(pipeline.as_bytes()).await.unwrap();

    let (code, got) = read_response(&mut reader).await;
    assert_eq!(code, 200);
    assert!(got == body, "first /big differs");
    assert_eq!(read_response(&mut reader).await, (200, b"small and in memory".to_vec()));
    assert_eq!(read_response(&mut reader).await, (206, body[5..13].to_vec()));
    assert_eq!(read_response(&mut reader).await, (404, b"not here".to_vec()));
    let (code, got) = read_response(&mut reader).await;
    assert_eq!(code, 200);
    assert!(got == body, "second /big differs");
    assert_eq!(read_response(&mut reader).await, (200, b"small and in memory".to_vec()));
    assert_eq!(zero_copy_hits(&h), 3, "the /big responses, the range included");
}

#[tokio::test]
async fn head_and_promoted_hits_do_not_use_sendfile() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _) = proxy_with_big_object(dir.path(), true).await;
    let head = h.send("HEAD", "/big", &[], None).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(h.get("/small").await.text(), "small and in memory");
    assert_eq!(zero_copy_hits(&h), 0);
    // The connection of the HEAD carried no body; a later GET on a new one still works.
    assert_eq!(h.get("/big").await.body.len(), 3_500_000);
    assert_eq!(zero_copy_hits(&h), 1);
}

#[tokio::test]
async fn a_large_object_moves_to_disk_once_durable_and_its_hits_use_sendfile() {
    let dir = tempfile::tempdir().unwrap();
    // The defaults but a memory tier that accepts large objects: promote_max is 1 MiB.
    let h = proxy(dir.path(), |c| c.cache.max_object = Size(8 << 20)).await;
    let body = numbered(3_000_000);
    h.origin.on("/big", Reply::ok(body.clone()).header("cache-control", FRESH));
    h.origin.on("/small", Reply::ok("stays in memory").header("cache-control", FRESH));
    assert!(h.get("/big").await.body == body);
    h.get("/small").await;
    on_disk(&h, 2).await;
    let state = h.proxy.state();
    let counters = state.store.counters();
    assert_eq!(counters.demotions.load(Relaxed), 1, "only the body over promote_max left memory");
    assert_eq!(h.proxy.state().store.stats().objects, 1);

    let reply = h.get("/big").await;
    assert!(reply.body == body);
    assert!(cache_status(&reply).contains("detail=disk"), "{}", cache_status(&reply));
    assert_eq!(zero_copy_hits(&h), 1);
    let small = h.get("/small").await;
    assert!(!cache_status(&small).contains("detail=disk"), "{}", cache_status(&small));
    assert_eq!(h.origin.hits("/big"), 1);
}
