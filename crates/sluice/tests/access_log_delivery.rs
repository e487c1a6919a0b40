//! The access log of a running `sluice serve` loses no line it could write: a request that
//! ends during the shutdown drain is in the file when the process has exited, and after
//! writes fail (a full disk: `/dev/full` here) the log goes on, counts what it dropped,
//! and a reopen (`SIGUSR1`) brings lines back.
//! Waits poll a condition with a deadline, or wait for the origin to be told to answer;
//! nothing sleeps as synchronisation.

mod common;

use common::{exchange, free_port, get_refused, logged_urls as logged, serve_logging, signal, until};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::mpsc;

/// An origin for one request: it reports the request's arrival on the first channel, and
/// answers `200` once told to on the second.
fn held_origin() -> (SocketAddr, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (arrived, arrival) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        arrived.send(()).unwrap();
        released.recv().unwrap();
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello").unwrap();
    });
    (addr, arrival, release)
}

#[test]
fn a_request_that_ends_during_the_shutdown_drain_is_in_the_log_when_the_process_exits() {
    let dir = tempfile::tempdir().unwrap();
    let (access, stderr) = (dir.path().join("access.log"), dir.path().join("stderr.log"));
    let (mut server, proxy, _admin) = serve_logging(dir.path(), &access, &stderr, &[]);
    let (origin, arrival, release) = held_origin();
    let url = format!("http://{origin}/slow");
    let request = format!("GET {url} HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n");
    let client = std::thread::spawn(move || exchange(proxy, &request));
    arrival.recv().unwrap();
    // SIGTERM while the origin holds its answer; it answers once the drain has begun.
    signal(&server.0, "TERM");
    until("the drain", || std::fs::read_to_string(&stderr).is_ok_and(|l| l.contains("shutting down")));
    release.send(()).unwrap();
    let response = client.join().unwrap().unwrap();
    assert!(response.starts_with("HTTP/1.1 200") && response.ends_with("hello"), "{response}");
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status}: {}", std::fs::read_to_string(&stderr).unwrap_or_default());
    assert_eq!(logged(&access), [url]);
}

#[test]
fn after_writes_fail_the_log_counts_what_it_drops_and_a_reopen_brings_lines_back() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (access, stderr) = (dir.path().join("access.log"), dir.path().join("stderr.log"));
    // Every write to the log fails with ENOSPC, as on a full disk.
    std::os::unix::fs::symlink(full, &access).unwrap();
    let (mut server, proxy, admin) = serve_logging(dir.path(), &access, &stderr, &[]);
    // Each request goes to an origin that refuses connections: a 502, logged with its URL.
    let refused = free_port();
    let get = |path: &str| get_refused(proxy, refused, path);
    let metrics = || {
        let request = "GET /metrics HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n";
        exchange(admin, request).unwrap_or_default()
    };
    get("/lost-1");
    get("/lost-2");
    until("two lines counted dropped", || metrics().contains("\nsluice_access_log_lines_dropped_total 2\n"));
    let errors = std::fs::read_to_string(&stderr).unwrap();
    assert_eq!(errors.matches("cannot write").count(), 1, "one report for the streak: {errors}");
    assert!(errors.contains("No space left on device"), "{errors}");

    // The path now leads to a writable file; the writer is still alive to reopen it.
    std::fs::remove_file(&access).unwrap();
    signal(&server.0, "USR1");
    until("the reopen", || std::fs::read_to_string(&stderr).is_ok_and(|l| l.contains("SIGUSR1: access log reopened")));
    get("/kept");
    until("a line in the writable file", || logged(&access) == [format!("http://127.0.0.1:{refused}/kept")]);
    // (Said once the line is written.)
    until("the summary of the streak", || {
        std::fs::read_to_string(&stderr).is_ok_and(|l| l.contains("writing again; 2 lines were lost"))
    });

    signal(&server.0, "TERM");
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status}: {}", std::fs::read_to_string(&stderr).unwrap_or_default());
}
